"""Checks deploy/kubernetes without a cluster (none exists on the development machines;
docs/kubernetes.md says what was and was not run):

1. Schemas: every object validates against the Kubernetes JSON schemas, strictly (an
   unknown or misspelt field is an error), for the oldest and the newest Kubernetes the
   manifests claim; kubernetes-validate bundles the schemas, so neither a cluster nor the
   network is needed. An object whose kind has no schema is an error, not a skip.
2. What the schemas cannot see: kustomization.yaml lists every manifest; selectors,
   headless Services, PodDisruptionBudgets and NetworkPolicies select the pods they are
   for and name ports those pods have; every $(VAR) in a container's arguments is defined
   in its environment; the cluster secret comes from the Secret, never from a literal
   value or the command line; the Prometheus annotations, the readiness probe and
   --metrics agree on the port; the agents list exactly the coordinators that exist by
   their stable names, the coordinators advertise those names and list exactly the etcd
   members, etcd's members list each other; --world-size is the Job's parallelism and the
   agents' quorum its disruption budget; tributary is PID 1 (SIGTERM drains) with a grace
   period to drain in.
3. With --tributary BINARY: every flag passed to `tributary coordinator` / `tributary
   agent` is one that the subcommand's --help lists, with a value exactly when it takes
   one, and every TRIBUTARY_* variable set is one that an option of it reads.

Usage: check_kubernetes.py MANIFEST_DIR [--tributary BINARY]
Exit 0 when everything holds; otherwise 1, one line per problem.
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

import yaml

# The oldest Kubernetes with every field used here generally available (Job
# podFailurePolicy: 1.31), and the newest whose schemas kubernetes-validate bundles.
KUBERNETES_VERSIONS = ("1.31", "1.37")
SECRET_REF = {"name": "tributary-secret", "key": "secret"}
IMAGE = "tributary"
MIN_DRAIN_GRACE_S = 30
VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
HELP_OPTION = re.compile(r"^  (?:-\w,)?(--[A-Za-z0-9][\w-]*)( [A-Z]+\b)?")
HELP_ENV = re.compile(r"\(Env:(\w+)\)")


class Resource:
    """One object of one manifest file."""

    def __init__(self, file, doc):
        self.file = file
        self.doc = doc

    @property
    def kind(self):
        return self.doc.get("kind", "?")

    @property
    def name(self):
        return self.doc.get("metadata", {}).get("name", "?")

    def where(self):
        return f"{self.file}: {self.kind}/{self.name}"


def load(directory):
    """(resources, kustomization) from every *.yaml file of directory."""
    resources, kustomization = [], None
    for path in sorted(Path(directory).glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            if doc.get("kind") == "Kustomization":
                kustomization = doc
            else:
                resources.append(Resource(path.name, doc))
    return resources, kustomization


# --- 1. schemas ---------------------------------------------------------------------


def schema_errors(resources, versions=KUBERNETES_VERSIONS):
    import kubernetes_validate  # the venv's (tests/deploy/make_venv.sh)

    errors = []
    for r in resources:
        for v in versions:
            try:
                kubernetes_validate.validate(r.doc, v, strict=True)
            except kubernetes_validate.ValidationError as e:
                path = ".".join(str(p) for p in e.path)
                errors.append(f"{r.where()}: Kubernetes {v} schema: {path}: {e.message}")
            except kubernetes_validate.SchemaNotFoundError as e:
                errors.append(f"{r.where()}: no schema in Kubernetes {v}: {e.message}")
    return errors


# --- 2. what the schemas cannot see -----------------------------------------------


def pod_template(r):
    """The pod template of a workload, or None."""
    template = r.doc.get("spec", {}).get("template")
    return template if r.kind in ("StatefulSet", "Job", "Deployment", "DaemonSet") else None


def workloads(resources):
    return [r for r in resources if pod_template(r) is not None]


def containers(resources):
    for r in workloads(resources):
        for c in pod_template(r)["spec"].get("containers", []):
            yield r, c


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def selected(resources, selector):
    return [r for r in workloads(resources)
            if selects(selector, pod_template(r)["metadata"].get("labels", {}))]


def port_names(r):
    return {p.get("name") for c in pod_template(r)["spec"]["containers"]
            for p in c.get("ports", [])}


def kustomization_errors(directory, kustomization, resources):
    if kustomization is None:
        return [f"{directory}: no kustomization.yaml"]
    listed = set(kustomization.get("resources", []))
    files = {r.file for r in resources}
    errors = [f"kustomization.yaml: {f} is not listed in resources" for f in files - listed]
    errors += [f"kustomization.yaml: lists {f}, which holds no object" for f in listed - files]
    if not any(i.get("name") == IMAGE for i in kustomization.get("images", [])):
        errors.append(f"kustomization.yaml: no images entry for '{IMAGE}'")
    return errors


def selector_errors(resources):
    errors = []
    for r in workloads(resources):
        match = r.doc["spec"].get("selector", {}).get("matchLabels")
        labels = pod_template(r)["metadata"].get("labels", {})
        if match is not None and not selects(match, labels):
            errors.append(f"{r.where()}: selector {match} does not match its pods' labels")
    for r in resources:
        if r.kind == "Service":
            errors += service_errors(resources, r)
        elif r.kind == "PodDisruptionBudget":
            match = r.doc["spec"]["selector"].get("matchLabels", {})
            if len(selected(resources, match)) != 1:
                errors.append(f"{r.where()}: selects the pods of "
                              f"{len(selected(resources, match))} workloads, not 1")
    return errors


def service_errors(resources, svc):
    pods = selected(resources, svc.doc["spec"].get("selector", {}))
    if not pods:
        return [f"{svc.where()}: its selector matches no workload's pods"]
    errors = []
    for p in svc.doc["spec"].get("ports", []):
        target = p.get("targetPort", p.get("port"))
        if isinstance(target, str) and not all(target in port_names(w) for w in pods):
            errors.append(f"{svc.where()}: targetPort '{target}' is no container port")
    return errors


def stable_name_errors(resources):
    """StatefulSets' serviceName and Jobs' subdomain: a headless Service for their pods."""
    errors = []
    services = {r.name: r for r in resources if r.kind == "Service"}
    for r in workloads(resources):
        name = (r.doc["spec"].get("serviceName") if r.kind == "StatefulSet"
                else pod_template(r)["spec"].get("subdomain") if r.kind == "Job" else None)
        if name is None:
            continue
        svc = services.get(name)
        labels = pod_template(r)["metadata"].get("labels", {})
        if svc is None or svc.doc["spec"].get("clusterIP") != "None":
            errors.append(f"{r.where()}: no headless Service '{name}' for its stable names")
        elif not selects(svc.doc["spec"].get("selector", {}), labels):
            errors.append(f"{r.where()}: Service '{name}' does not select its pods")
    return errors


def network_policy_errors(resources):
    errors = []
    for r in (r for r in resources if r.kind == "NetworkPolicy"):
        targets = selected(resources, r.doc["spec"]["podSelector"].get("matchLabels", {}))
        if not targets:
            errors.append(f"{r.where()}: podSelector matches no workload's pods")
        for rule in r.doc["spec"].get("ingress", []):
            for peer in rule.get("from", []):
                match = peer.get("podSelector", {}).get("matchLabels", {})
                if not selected(resources, match):
                    errors.append(f"{r.where()}: ingress from {match}: no such pods")
            for p in rule.get("ports", []):
                port = p.get("port")
                if isinstance(port, str) and not all(port in port_names(t) for t in targets):
                    errors.append(f"{r.where()}: ingress port '{port}' is no container port")
    return errors


def env_names(container):
    return {e["name"] for e in container.get("env", [])}


def env_value(container, name):
    """The env entry `name` of a container (its dict), or None."""
    return next((e for e in container.get("env", []) if e["name"] == name), None)


def env_errors(resources):
    errors = []
    for r, c in containers(resources):
        words = c.get("command", []) + c.get("args", [])
        for var in sorted({v for w in words for v in VAR_REF.findall(w)} - env_names(c)):
            errors.append(f"{r.where()}: container {c['name']}: $({var}) is not in its env "
                          "(Kubernetes would pass it on literally)")
        if any(w == "--secret" or w.startswith("--secret=") for w in words):
            errors.append(f"{r.where()}: container {c['name']}: --secret on the command line "
                          "(use TRIBUTARY_SECRET from the Secret)")
        for e in c.get("env", []):
            if "SECRET" in e["name"] and e.get("valueFrom", {}).get("secretKeyRef") != SECRET_REF:
                errors.append(f"{r.where()}: container {c['name']}: {e['name']} must come from "
                              f"secretKeyRef {SECRET_REF}")
    return errors


def parse_args(words):
    """[(flag, value or None)] of a command line (--flag value, --flag=value)."""
    out, i = [], 0
    while i < len(words):
        w = words[i]
        if w.startswith("--") and "=" in w:
            out.append(tuple(w.split("=", 1)))
        elif w.startswith("--"):
            takes = i + 1 < len(words) and not words[i + 1].startswith("--")
            out.append((w, words[i + 1] if takes else None))
            i += 1 if takes else 0
        i += 1
    return out


def tributary(resources, subcommand):
    """[(resource, container, {flag: value})] of the containers running `subcommand`."""
    found = []
    for r, c in containers(resources):
        args = c.get("args", [])
        if args[:1] == [subcommand] and c.get("image", "").split(":")[0] == IMAGE:
            found.append((r, c, dict(parse_args(args[1:]))))
    return found


def one(resources, subcommand):
    found = tributary(resources, subcommand)
    if len(found) != 1:
        raise LookupError(f"{len(found)} workloads run `tributary {subcommand}`, not 1")
    return found[0]


def etcd(resources):
    found = [(r, c) for r, c in containers(resources) if c["name"] == "etcd"]
    if len(found) != 1:
        raise LookupError(f"{len(found)} workloads run an etcd container, not 1")
    r, c = found[0]
    return r, c, dict(parse_args(c.get("args", [])))


def field_ref(container, name):
    e = env_value(container, name) or {}
    return e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")


def port_of(url):
    m = re.search(r":(\d+)$", url or "")
    return int(m.group(1)) if m else None


def coordinator_wiring_errors(resources):
    """Agents list exactly the coordinators that exist, by the names they advertise."""
    r, c, flags = one(resources, "coordinator")
    _, agent, agent_flags = one(resources, "agent")
    svc, port = r.doc["spec"]["serviceName"], port_of(flags.get("--bind"))
    want = [f"tcp://{r.name}-{i}.{svc}:{port}" for i in range(r.doc["spec"]["replicas"])]
    listed = agent_flags.get("--coordinator") or (
        env_value(agent, "TRIBUTARY_COORDINATOR") or {}).get("value", "")
    errors = []
    if listed.split(",") != want:
        errors.append(f"{r.where()}: agents list coordinators {listed!r}, the StatefulSet "
                      f"has {','.join(want)!r}")
    if flags.get("--advertise") != f"tcp://$(POD_NAME).{svc}:{port}" or \
            field_ref(c, "POD_NAME") != "metadata.name":
        errors.append(f"{r.where()}: --advertise must be tcp://$(POD_NAME).{svc}:{port} "
                      "with POD_NAME from metadata.name (the name agents list)")
    return errors


def etcd_wiring_errors(resources):
    """The coordinators list every etcd member; the members list each other."""
    coordinator, _, flags = one(resources, "coordinator")
    r, c, etcd_flags = etcd(resources)
    svc, n = r.doc["spec"]["serviceName"], r.doc["spec"]["replicas"]
    client = port_of(etcd_flags.get("--advertise-client-urls"))
    peer = port_of(etcd_flags.get("--initial-advertise-peer-urls"))
    errors = []
    want = ",".join(f"http://{r.name}-{i}.{svc}:{client}" for i in range(n))
    if flags.get("--etcd") != want:
        errors.append(f"{coordinator.where()}: --etcd {flags.get('--etcd')!r}, the etcd "
                      f"StatefulSet has {want!r}")
    want = ",".join(f"{r.name}-{i}=http://{r.name}-{i}.{svc}:{peer}" for i in range(n))
    if etcd_flags.get("--initial-cluster") != want:
        errors.append(f"{r.where()}: --initial-cluster should be {want!r}")
    for flag, p in (("--advertise-client-urls", client), ("--initial-advertise-peer-urls", peer)):
        if etcd_flags.get(flag) != f"http://$(POD_NAME).{svc}:{p}":
            errors.append(f"{r.where()}: {flag} should be http://$(POD_NAME).{svc}:{p}")
    if field_ref(c, "POD_NAME") != "metadata.name" or etcd_flags.get("--name") != "$(POD_NAME)":
        errors.append(f"{r.where()}: --name must be $(POD_NAME), from metadata.name")
    return errors


def size_errors(resources):
    """--world-size is the Job's parallelism; the agents' PDB keeps their quorum."""
    coordinator, _, flags = one(resources, "coordinator")
    job, _, agent_flags = one(resources, "agent")
    spec, errors = job.doc["spec"], []
    world = int(flags.get("--world-size", 1))
    if not spec.get("parallelism") == spec.get("completions") == world:
        errors.append(f"{job.where()}: parallelism {spec.get('parallelism')} and completions "
                      f"{spec.get('completions')} must both be the coordinators' --world-size "
                      f"{world}")
    quorum = int(agent_flags.get("--min-world-size", 1))
    for pdb in (r for r in resources if r.kind == "PodDisruptionBudget"):
        if selected(resources, pdb.doc["spec"]["selector"]["matchLabels"]) == [job] and \
                pdb.doc["spec"].get("minAvailable") != quorum:
            errors.append(f"{pdb.where()}: minAvailable {pdb.doc['spec'].get('minAvailable')} "
                          f"should be the agents' --min-world-size {quorum}")
    return errors


def data_plane_errors(resources):
    job, agent, flags = one(resources, "agent")
    errors = []
    if flags.get("--data-address") != "$(POD_IP)" or field_ref(agent, "POD_IP") != "status.podIP":
        errors.append(f"{job.where()}: --data-address must be $(POD_IP), from status.podIP")
    if flags.get("--bind-host") != "0.0.0.0":
        errors.append(f"{job.where()}: --bind-host must be 0.0.0.0 to be reached on the pod IP")
    return errors


def metrics_port(c):
    """The port of --metrics (tributary) or --listen-metrics-urls (etcd)."""
    if c.get("args", [""])[0] in ("coordinator", "agent"):
        value = dict(parse_args(c["args"][1:])).get("--metrics")
    else:
        value = dict(parse_args(c.get("args", []))).get("--listen-metrics-urls")
    return port_of(value)


def scrape_errors(resources):
    """Annotations, the metrics container port, the readiness probe and the flag agree."""
    errors = []
    for r, c in containers(resources):
        notes = pod_template(r)["metadata"].get("annotations", {})
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
        flag = metrics_port(c)
        probe = c.get("readinessProbe", {}).get("httpGet", {}).get("port")
        probe = ports.get(probe, probe)
        if notes.get("prometheus.io/scrape") != "true":
            errors.append(f"{r.where()}: no prometheus.io/scrape: \"true\" annotation")
        got = (notes.get("prometheus.io/port"), ports.get("metrics"), flag, probe)
        if flag is None or got != (str(flag), flag, flag, flag):
            errors.append(f"{r.where()}: prometheus.io/port, container port 'metrics', the "
                          f"metrics flag and the readiness probe disagree: {got}")
    return errors


def drain_errors(resources):
    """tributary is PID 1 (its SIGTERM handler drains) and has time to drain."""
    errors = []
    for sub in ("coordinator", "agent"):
        for r, c, _ in tributary(resources, sub):
            if "command" in c:
                errors.append(f"{r.where()}: container {c['name']}: a command replaces the "
                              "image's ENTRYPOINT; SIGTERM must reach tributary as PID 1")
    job, _, _ = one(resources, "agent")
    grace = pod_template(job)["spec"].get("terminationGracePeriodSeconds", 30)
    if grace < MIN_DRAIN_GRACE_S:
        errors.append(f"{job.where()}: terminationGracePeriodSeconds {grace} leaves no time to "
                      f"drain (at least {MIN_DRAIN_GRACE_S})")
    rules = job.doc["spec"].get("podFailurePolicy", {}).get("rules", [])
    if not any(rule.get("action") == "Ignore" and
               any(p.get("type") == "DisruptionTarget" for p in rule.get("onPodConditions", []))
               for rule in rules):
        errors.append(f"{job.where()}: no podFailurePolicy rule ignoring DisruptionTarget: "
                      "preempted pods would use up backoffLimit")
    return errors


def wiring_errors(resources):
    errors = []
    for check in (selector_errors, stable_name_errors, network_policy_errors, env_errors,
                  scrape_errors, coordinator_wiring_errors, etcd_wiring_errors, size_errors,
                  data_plane_errors, drain_errors):
        try:
            errors += check(resources)
        except (LookupError, KeyError, TypeError, ValueError) as e:
            errors.append(f"{check.__name__}: cannot check: {type(e).__name__}: {e}")
    return errors


# --- 3. flags, against the binary's --help --------------------------------------------


def parse_help(text):
    """({flag: takes a value}, {environment variable}) from CLI11's --help."""
    flags, env = {}, set(HELP_ENV.findall(text))
    for line in text.splitlines():
        m = HELP_OPTION.match(line)
        if m:
            flags[m.group(1)] = m.group(2) is not None
    return flags, env


def help_of(binary, subcommand):
    out = subprocess.run([binary, subcommand, "--help"], capture_output=True, text=True,
                         timeout=30, check=True)
    return parse_help(out.stdout)


def flag_errors(resources, helps):
    """helps: {subcommand: parse_help(...)}."""
    errors = []
    for sub, (known, env) in helps.items():
        for r, c, _ in tributary(resources, sub):
            for flag, value in parse_args(c["args"][1:]):
                if flag not in known:
                    errors.append(f"{r.where()}: `tributary {sub}` has no flag {flag}")
                elif known[flag] != (value is not None):
                    errors.append(f"{r.where()}: `tributary {sub}` {flag} "
                                  f"{'takes a value' if known[flag] else 'takes no value'}")
            for name in sorted(n for n in env_names(c) if n.startswith("TRIBUTARY_")):
                if name not in env:
                    errors.append(f"{r.where()}: no option of `tributary {sub}` reads {name}")
    return errors


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory")
    parser.add_argument("--tributary", help="the built binary: check the flags against it")
    args = parser.parse_args(argv)
    resources, kustomization = load(args.directory)
    if args.tributary:
        helps = {sub: help_of(args.tributary, sub) for sub in ("coordinator", "agent")}
        errors = flag_errors(resources, helps)
        what = f"flags of {len(list(containers(resources)))} containers against --help"
    else:
        errors = (kustomization_errors(args.directory, kustomization, resources) +
                  schema_errors(resources) + wiring_errors(resources))
        what = (f"{len(resources)} objects against the schemas of Kubernetes "
                f"{' and '.join(KUBERNETES_VERSIONS)}, and their wiring")
    for e in errors:
        print(e)
    if errors:
        print(f"FAILED: {what}: {len(errors)} problem{'s' if len(errors) > 1 else ''}")
    else:
        print(f"ok: {what}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
