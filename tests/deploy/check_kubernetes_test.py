"""check_kubernetes.py must fail on broken manifests, or it proves nothing: each test here
breaks a copy of deploy/kubernetes in one way (a misspelt field, a wrong type, a flag the
binary lacks, a secret on the command line, coordinators the agents do not list, ...) and
asserts the checker names the problem; the manifests as committed pass.

Usage: check_kubernetes_test.py SOURCE_DIR (unittest; the venv of make_venv.sh).
"""
import contextlib
import io
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

import yaml

import check_kubernetes as ck

SOURCE = Path(sys.argv.pop(1)) if len(sys.argv) > 1 else Path(__file__).parents[2]
MANIFESTS = SOURCE / "deploy" / "kubernetes"

# `coordinator --help` of a program built with Debian 12's CLI11 (2.1.2) declaring options
# the way cli/ does: a default, an environment variable, a flag, a list, a short alias, an
# option function, a set of choices.
CLI11_HELP = """\
run the membership coordinator
Usage: ./p coordinator [OPTIONS]

Options:
  -h,--help                   Print this help message and exit
  --bind TEXT=tcp://127.0.0.1:7070
                              ZeroMQ endpoint to bind (port 0: ephemeral)
  --secret TEXT (Env:TRIBUTARY_SECRET)
                              cluster secret
  --world-size INT:POSITIVE=1 members to gather before the first view
  --no-straggler-eviction     never evict stragglers
  --etcd TEXT ...             replicated coordinators: etcd client URLs, comma-separated (default: the local journal, if any)
  -b,--min-bytes UINT:SIZE [b, kb(=1024b), ...]=4
                              smallest size
  --stall-timeout-ms INT:POSITIVE
                              with --failover: no acknowledgement on a pair's path for this long moves the pair to its standby path (default 2000)
  --transport TEXT:{auto,shm,rdma,tcp}=auto
                              data-plane transport: auto, shm
  --log-level TEXT            least severe log lines written: debug, info, warn, error

"""


def committed():
    return ck.load(MANIFESTS)


def find(resources, kind, name):
    return next(r.doc for r in resources if r.kind == kind and r.name == name)


def container(resources, kind, name):
    return find(resources, kind, name)["spec"]["template"]["spec"]["containers"][0]


def set_arg(c, flag, value):
    args = c["args"]
    args[args.index(flag) + 1] = value


def env(c, name):
    return next(e for e in c["env"] if e["name"] == name)


def helps_for(resources):
    """--help as it would list exactly the flags and variables the manifests use."""
    helps = {}
    for sub in ("coordinator", "agent"):
        flags, names = {}, set()
        for _, c, _ in ck.tributary(resources, sub):
            flags.update({f: v is not None for f, v in ck.parse_args(c["args"][1:])})
            names |= {n for n in ck.env_names(c) if n.startswith("TRIBUTARY_")}
        helps[sub] = (flags, names)
    return helps


class CommittedManifests(unittest.TestCase):
    def test_pass_every_check(self):
        resources, kustomization = committed()
        self.assertEqual(ck.kustomization_errors(MANIFESTS, kustomization, resources), [])
        self.assertEqual(ck.schema_errors(resources), [])
        self.assertEqual(ck.wiring_errors(resources), [])

    def test_hold_what_the_issue_asks_for(self):
        resources, _ = committed()
        kinds = sorted((r.kind, r.name) for r in resources)
        for want in [("StatefulSet", "etcd"), ("StatefulSet", "tributary-coordinator"),
                     ("Job", "tributary-agent"), ("PodDisruptionBudget", "tributary-agent")]:
            self.assertIn(want, kinds)
        self.assertEqual(find(resources, "StatefulSet", "etcd")["spec"]["replicas"], 3)
        self.assertEqual(find(resources, "StatefulSet", "tributary-coordinator")["spec"]["replicas"], 3)
        self.assertEqual(find(resources, "Job", "tributary-agent")["spec"]["completionMode"], "Indexed")


class Mutations(unittest.TestCase):
    """Each breaks one thing and expects the checker to say so."""

    def errors(self, mutate):
        resources, kustomization = committed()
        mutate(resources)
        return (ck.kustomization_errors(MANIFESTS, kustomization, resources) +
                ck.schema_errors(resources) + ck.wiring_errors(resources))

    def assertCaught(self, mutate, *needles):
        errors = self.errors(mutate)
        for needle in needles:
            self.assertTrue(any(needle in e for e in errors),
                            f"no error mentions {needle!r}; got {errors}")

    def test_misspelt_field(self):
        def m(rs):
            spec = find(rs, "Job", "tributary-agent")["spec"]["template"]["spec"]
            spec["terminationGracePeriodSecond"] = spec.pop("terminationGracePeriodSeconds")
        self.assertCaught(m, "schema", "terminationGracePeriodSecond")

    def test_wrong_type(self):
        self.assertCaught(
            lambda rs: find(rs, "StatefulSet", "etcd")["spec"].update(replicas="three"),
            "schema: spec.replicas")

    def test_api_version_that_no_longer_exists(self):
        self.assertCaught(
            lambda rs: find(rs, "StatefulSet", "etcd").update(apiVersion="apps/v1beta1"),
            "no schema in Kubernetes 1.31")

    def test_field_newer_than_the_oldest_version(self):
        def m(rs):
            rule = find(rs, "Job", "tributary-agent")["spec"]["podFailurePolicy"]["rules"][0]
            del rule["onPodConditions"][0]["status"]  # optional only from 1.32 on
        self.assertCaught(m, "Kubernetes 1.31 schema: spec.podFailurePolicy")

    def test_undefined_variable(self):
        self.assertCaught(
            lambda rs: set_arg(container(rs, "Job", "tributary-agent"), "--data-address", "$(POD_IPS)"),
            "$(POD_IPS) is not in its env")

    def test_secret_as_a_literal(self):
        def m(rs):
            e = env(container(rs, "StatefulSet", "tributary-coordinator"), "TRIBUTARY_SECRET")
            e.pop("valueFrom")
            e["value"] = "hunter2"
        self.assertCaught(m, "TRIBUTARY_SECRET must come from secretKeyRef")

    def test_secret_from_another_secret(self):
        def m(rs):
            e = env(container(rs, "Job", "tributary-agent"), "TRIBUTARY_SECRET")
            e["valueFrom"]["secretKeyRef"]["name"] = "other"
        self.assertCaught(m, "TRIBUTARY_SECRET must come from secretKeyRef")

    def test_secret_on_the_command_line(self):
        self.assertCaught(
            lambda rs: container(rs, "Job", "tributary-agent")["args"].extend(["--secret", "x"]),
            "--secret on the command line")

    def test_scrape_port_not_the_metrics_port(self):
        def m(rs):
            find(rs, "Job", "tributary-agent")["spec"]["template"]["metadata"]["annotations"][
                "prometheus.io/port"] = "9999"
        self.assertCaught(m, "prometheus.io/port, container port 'metrics', the metrics flag")

    def test_metrics_flag_moved(self):
        self.assertCaught(
            lambda rs: set_arg(container(rs, "StatefulSet", "tributary-coordinator"), "--metrics",
                               "0.0.0.0:9999"),
            "disagree")

    def test_no_scrape_annotation(self):
        def m(rs):
            del find(rs, "StatefulSet", "etcd")["spec"]["template"]["metadata"]["annotations"][
                "prometheus.io/scrape"]
        self.assertCaught(m, "no prometheus.io/scrape")

    def test_more_coordinators_than_the_agents_list(self):
        self.assertCaught(
            lambda rs: find(rs, "StatefulSet", "tributary-coordinator")["spec"].update(replicas=5),
            "agents list coordinators")

    def test_coordinator_advertises_another_name(self):
        self.assertCaught(
            lambda rs: set_arg(container(rs, "StatefulSet", "tributary-coordinator"), "--advertise",
                               "tcp://0.0.0.0:7070"),
            "--advertise must be")

    def test_more_etcd_members_than_listed(self):
        self.assertCaught(lambda rs: find(rs, "StatefulSet", "etcd")["spec"].update(replicas=5),
                          "--etcd", "--initial-cluster should be")

    def test_world_size_not_the_job(self):
        self.assertCaught(
            lambda rs: set_arg(container(rs, "StatefulSet", "tributary-coordinator"), "--world-size", "5"),
            "must both be the coordinators' --world-size 5")

    def test_disruption_budget_below_the_quorum(self):
        self.assertCaught(
            lambda rs: find(rs, "PodDisruptionBudget", "tributary-agent")["spec"].update(minAvailable=1),
            "should be the agents' --min-world-size 2")

    def test_service_selects_nothing(self):
        def m(rs):
            find(rs, "Service", "tributary-coordinator")["spec"]["selector"][
                "app.kubernetes.io/component"] = "coordinators"
        self.assertCaught(m, "its selector matches no workload's pods",
                          "Service 'tributary-coordinator' does not select its pods")

    def test_job_subdomain_without_service(self):
        def m(rs):
            find(rs, "Job", "tributary-agent")["spec"]["template"]["spec"]["subdomain"] = "agents"
        self.assertCaught(m, "no headless Service 'agents'")

    def test_data_address_not_the_pod(self):
        self.assertCaught(
            lambda rs: set_arg(container(rs, "Job", "tributary-agent"), "--data-address", "10.0.0.7"),
            "--data-address must be $(POD_IP)")

    def test_shell_in_front_of_the_agent(self):
        self.assertCaught(
            lambda rs: container(rs, "Job", "tributary-agent").update(command=["/bin/sh", "-c"]),
            "SIGTERM must reach tributary as PID 1")

    def test_no_time_to_drain(self):
        def m(rs):
            find(rs, "Job", "tributary-agent")["spec"]["template"]["spec"][
                "terminationGracePeriodSeconds"] = 5
        self.assertCaught(m, "leaves no time to drain")

    def test_preemption_counted_as_failure(self):
        self.assertCaught(lambda rs: find(rs, "Job", "tributary-agent")["spec"].pop("podFailurePolicy"),
                          "no podFailurePolicy rule ignoring DisruptionTarget")

    def test_network_policy_names_a_missing_port(self):
        def m(rs):
            find(rs, "NetworkPolicy", "etcd")["spec"]["ingress"][0]["ports"][0]["port"] = "clients"
        self.assertCaught(m, "ingress port 'clients' is no container port")

    def test_file_left_out_of_the_kustomization(self):
        resources, kustomization = committed()
        kustomization["resources"].remove("agents.yaml")
        self.assertIn("kustomization.yaml: agents.yaml is not listed in resources",
                      ck.kustomization_errors(MANIFESTS, kustomization, resources))


class Flags(unittest.TestCase):
    def test_parse_cli11_help(self):
        flags, env = ck.parse_help(CLI11_HELP)
        self.assertEqual(flags, {
            "--help": False, "--bind": True, "--secret": True, "--world-size": True,
            "--no-straggler-eviction": False, "--etcd": True, "--min-bytes": True,
            "--stall-timeout-ms": True, "--transport": True, "--log-level": True})
        self.assertEqual(env, {"TRIBUTARY_SECRET"})

    def test_parse_args(self):
        self.assertEqual(ck.parse_args(["--a", "1", "--b", "--c=x=y", "--d", "$(V)"]),
                         [("--a", "1"), ("--b", None), ("--c", "x=y"), ("--d", "$(V)")])

    def test_committed_flags_pass(self):
        resources, _ = committed()
        self.assertEqual(ck.flag_errors(resources, helps_for(resources)), [])

    def test_unknown_flag(self):
        resources, _ = committed()
        helps = helps_for(resources)
        container(resources, "Job", "tributary-agent")["args"][1] = "--work-load"
        self.assertIn("Job/tributary-agent: `tributary agent` has no flag --work-load",
                      [e.split(": ", 1)[1] for e in ck.flag_errors(resources, helps)])

    def test_flag_that_takes_no_value(self):
        resources, _ = committed()
        helps = helps_for(resources)
        helps["coordinator"][0]["--world-size"] = False
        self.assertTrue(any("--world-size takes no value" in e
                            for e in ck.flag_errors(resources, helps)))

    def test_option_without_its_value(self):
        resources, _ = committed()
        helps = helps_for(resources)
        container(resources, "StatefulSet", "tributary-coordinator")["args"].append("--journal")
        helps["coordinator"][0]["--journal"] = True
        self.assertTrue(any("--journal takes a value" in e
                            for e in ck.flag_errors(resources, helps)))

    def test_variable_no_option_reads(self):
        resources, _ = committed()
        helps = helps_for(resources)
        env(container(resources, "Job", "tributary-agent"), "TRIBUTARY_COORDINATOR")["name"] = \
            "TRIBUTARY_COORDINATORS"
        self.assertTrue(any("reads TRIBUTARY_COORDINATORS" in e
                            for e in ck.flag_errors(resources, helps)))


class CommandLine(unittest.TestCase):
    """The ctest command itself exits 1 on a broken manifest directory."""

    def run_main(self, directory):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = ck.main([str(directory)])
        return rc, out.getvalue()

    def test_committed_directory_passes(self):
        rc, out = self.run_main(MANIFESTS)
        self.assertEqual(rc, 0, out)
        self.assertIn("ok: 11 objects", out)

    def test_broken_file_fails(self):
        with tempfile.TemporaryDirectory() as tmp:
            for f in MANIFESTS.glob("*.yaml"):
                shutil.copy(f, tmp)
            docs = list(yaml.safe_load_all((Path(tmp) / "coordinator.yaml").read_text()))
            docs[1]["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
            (Path(tmp) / "coordinator.yaml").write_text(yaml.safe_dump_all(docs))
            rc, out = self.run_main(tmp)
        self.assertEqual(rc, 1)
        self.assertIn("FAILED", out)
        self.assertIn("'resource' was unexpected", out)


if __name__ == "__main__":
    unittest.main(verbosity=1)
