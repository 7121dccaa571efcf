// Command k8s-check validates the Kubernetes example of docs/kubernetes/ against Kubernetes'
// own API types, for tests/deploy_files.rs (no cluster needed).
//
//	go run . DIR...
//
// Every YAML document of every DIR/*.yaml is decoded strictly (an unknown or duplicated field
// is an error) into the typed object its apiVersion and kind name, names and labels are
// checked with apimachinery's validation, and the objects are checked against each other and
// against the mirrorgate configuration the ConfigMap holds: the Deployment mounts that
// ConfigMap where its command line reads the configuration, its probes GET /ready and /health
// on the port of `metrics.listen`, the Service and the PodDisruptionBudget select the pods,
// the Service has every port of every listener's range with the same target port, and each
// listener advertises the Service's DNS name.
//
// Prints one JSON object per DIR on stdout: {"dir", "errors", "objects", "config_path",
// "proxy_yaml", "env"}; the test asserts on errors and runs `mirrorgate run --check` on
// proxy_yaml with env (the MIRRORGATE__ variables of the container). Exit status 0 when every
// DIR was read, whatever it found; 2 on a usage or I/O error.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// stopGraceSeconds is how long mirrorgate's stop may wait for an open destination transaction
// of a mirror (STOP_GRACE in src/mirror/dataplane/partition.rs).
const stopGraceSeconds = 30

// The part of proxy.yaml this check needs; `mirrorgate run --check` validates the rest.
type proxyConfig struct {
	Listeners []struct {
		Name           string `json:"name"`
		AdvertisedHost string `json:"advertised_host"`
		PortRange      string `json:"port_range"`
	} `json:"listeners"`
	Metrics struct {
		Listen string `json:"listen"`
	} `json:"metrics"`
}

type result struct {
	Dir        string            `json:"dir"`
	Errors     []string          `json:"errors"`
	Objects    []string          `json:"objects"`
	ConfigPath string            `json:"config_path"`
	ProxyYAML  string            `json:"proxy_yaml"`
	Env        map[string]string `json:"env"`
}

type checker struct {
	res         result
	namespaces  []*corev1.Namespace
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	configMaps  []*corev1.ConfigMap
	pdbs        []*policyv1.PodDisruptionBudget
}

func (c *checker) fail(format string, args ...any) {
	c.res.Errors = append(c.res.Errors, fmt.Sprintf(format, args...))
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: k8s-check DIR...")
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, dir := range os.Args[1:] {
		c := &checker{res: result{Dir: dir, Errors: []string{}, Objects: []string{}, Env: map[string]string{}}}
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			fmt.Fprintf(os.Stderr, "k8s-check: no *.yaml in %s (%v)\n", dir, err)
			os.Exit(2)
		}
		for _, f := range files {
			text, err := os.ReadFile(f)
			if err != nil {
				fmt.Fprintf(os.Stderr, "k8s-check: %v\n", err)
				os.Exit(2)
			}
			for i, doc := range documents(text) {
				c.decode(fmt.Sprintf("%s, document %d", filepath.Base(f), i+1), doc)
			}
		}
		c.crossCheck()
		if err := enc.Encode(c.res); err != nil {
			fmt.Fprintf(os.Stderr, "k8s-check: %v\n", err)
			os.Exit(2)
		}
	}
}

// documents splits a YAML stream on `---` lines and drops documents holding only comments.
func documents(text []byte) [][]byte {
	var docs [][]byte
	var cur []string
	flush := func() {
		body := strings.Join(cur, "\n")
		for _, l := range cur {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
				docs = append(docs, []byte(body))
				break
			}
		}
		cur = nil
	}
	for _, l := range strings.Split(string(text), "\n") {
		if strings.TrimRight(l, " \t\r") == "---" {
			flush()
			continue
		}
		cur = append(cur, l)
	}
	flush()
	return docs
}

// decode reads one document strictly into the type its apiVersion and kind name.
func (c *checker) decode(where string, doc []byte) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		c.fail("%s: not YAML: %v", where, err)
		return
	}
	var obj metav1.Object
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Namespace":
		o := &corev1.Namespace{}
		c.namespaces, obj = append(c.namespaces, o), o
	case "apps/v1 Deployment":
		o := &appsv1.Deployment{}
		c.deployments, obj = append(c.deployments, o), o
	case "v1 Service":
		o := &corev1.Service{}
		c.services, obj = append(c.services, o), o
	case "v1 ConfigMap":
		o := &corev1.ConfigMap{}
		c.configMaps, obj = append(c.configMaps, o), o
	case "policy/v1 PodDisruptionBudget":
		o := &policyv1.PodDisruptionBudget{}
		c.pdbs, obj = append(c.pdbs, o), o
	default:
		c.fail("%s: apiVersion %q kind %q is not one this example uses", where, tm.APIVersion, tm.Kind)
		return
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		c.fail("%s (%s): %v", where, tm.Kind, err)
		return
	}
	c.res.Objects = append(c.res.Objects, tm.Kind+"/"+obj.GetName())
	name := obj.GetName()
	var msgs []string
	switch tm.Kind {
	case "Namespace":
		msgs = validation.IsDNS1123Label(name)
	case "Service":
		msgs = validation.IsDNS1035Label(name)
	default:
		msgs = validation.IsDNS1123Subdomain(name)
	}
	for _, m := range msgs {
		c.fail("%s: %s name %q: %s", where, tm.Kind, name, m)
	}
	if tm.Kind != "Namespace" {
		for _, m := range validation.IsDNS1123Label(obj.GetNamespace()) {
			c.fail("%s: namespace %q: %s", where, obj.GetNamespace(), m)
		}
	}
	for _, e := range metav1validation.ValidateLabels(obj.GetLabels(), field.NewPath("metadata", "labels")) {
		c.fail("%s: %v", where, e)
	}
}

func one[T any](c *checker, kind string, objs []T) T {
	var zero T
	if len(objs) != 1 {
		c.fail("expected exactly one %s, found %d", kind, len(objs))
		return zero
	}
	return objs[0]
}

// portRange parses `FIRST-LAST`.
func portRange(s string) (int32, int32, error) {
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.Atoi(strings.TrimSpace(a))
	last, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || first <= 0 || last < first || last > 65535 {
		return 0, 0, fmt.Errorf("port_range %q is not FIRST-LAST", s)
	}
	return int32(first), int32(last), nil
}

// containerPort resolves a probe's or a Service's target port against the container's ports.
func containerPort(p intstr.IntOrString, ports []corev1.ContainerPort) (int32, bool) {
	if p.Type == intstr.Int {
		return p.IntVal, true
	}
	for _, cp := range ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

func (c *checker) crossCheck() {
	ns := one(c, "Namespace", c.namespaces)
	d := one(c, "Deployment", c.deployments)
	svc := one(c, "Service", c.services)
	cm := one(c, "ConfigMap", c.configMaps)
	pdb := one(c, "PodDisruptionBudget", c.pdbs)
	if ns == nil || d == nil || svc == nil || cm == nil || pdb == nil {
		return
	}
	for _, o := range []metav1.Object{d, svc, cm, pdb} {
		if o.GetNamespace() != ns.Name {
			c.fail("%s is in namespace %q, not %q", o.GetName(), o.GetNamespace(), ns.Name)
		}
	}

	// The pods: selected by the Deployment, the Service and the PodDisruptionBudget.
	podLabels := labels.Set(d.Spec.Template.Labels)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		c.fail("Deployment %s: replicas must be 3, is %v", d.Name, d.Spec.Replicas)
	}
	selects := func(what string, sel *metav1.LabelSelector) {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil || sel == nil || s.Empty() {
			c.fail("%s: selector %v: %v", what, sel, err)
			return
		}
		if !s.Matches(podLabels) {
			c.fail("%s: selector %s does not select the Deployment's pods (labels %v)", what, s, podLabels)
		}
	}
	selects("Deployment "+d.Name, d.Spec.Selector)
	selects("PodDisruptionBudget "+pdb.Name, pdb.Spec.Selector)
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		c.fail("Service %s: selector %v does not select the Deployment's pods (labels %v)", svc.Name, svc.Spec.Selector, podLabels)
	}
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || pdb.Spec.MinAvailable != nil {
		c.fail("PodDisruptionBudget %s: maxUnavailable must be 1 (and minAvailable unset): %v", pdb.Name, pdb.Spec.MaxUnavailable)
	}

	pod := d.Spec.Template.Spec
	var mg *corev1.Container
	for i := range pod.Containers {
		if pod.Containers[i].Name == "mirrorgate" {
			mg = &pod.Containers[i]
		}
	}
	if mg == nil {
		c.fail("Deployment %s: no container named mirrorgate", d.Name)
		return
	}

	// The configuration: `run --config PATH`, PATH a file of the mounted ConfigMap.
	args := append(slices.Clone(mg.Command), mg.Args...)
	i := slices.Index(args, "--config")
	if len(args) == 0 || args[0] != "run" || i < 0 || i+1 >= len(args) {
		c.fail("container mirrorgate: args %q are not `run --config PATH`", args)
		return
	}
	c.res.ConfigPath = args[i+1]
	key := ""
	for _, m := range mg.VolumeMounts {
		var rel string
		switch {
		case m.SubPath != "" && m.MountPath == c.res.ConfigPath:
			rel = m.SubPath
		case m.SubPath == "" && strings.HasPrefix(c.res.ConfigPath, strings.TrimSuffix(m.MountPath, "/")+"/"):
			rel = strings.TrimPrefix(c.res.ConfigPath, strings.TrimSuffix(m.MountPath, "/")+"/")
		default:
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil || v.ConfigMap.Name != cm.Name {
				continue
			}
			if len(v.ConfigMap.Items) == 0 {
				key = rel
			}
			for _, it := range v.ConfigMap.Items {
				if path.Clean(it.Path) == path.Clean(rel) {
					key = it.Key
				}
			}
		}
	}
	text, ok := cm.Data[key]
	if key == "" || !ok {
		c.fail("container mirrorgate reads %s, which is no key of ConfigMap %s mounted there (keys %v)", c.res.ConfigPath, cm.Name, slices.Sorted(func(yield func(string) bool) {
			for k := range cm.Data {
				if !yield(k) {
					return
				}
			}
		}))
		return
	}
	c.res.ProxyYAML = text
	var cfg proxyConfig
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		c.fail("ConfigMap %s, %s: %v", cm.Name, key, err)
		return
	}

	// Probes: GET /ready and /health on the port of metrics.listen.
	_, mport, err := splitHostPort(cfg.Metrics.Listen)
	if err != nil {
		c.fail("ConfigMap %s: metrics.listen %q: %v (the probes need it)", cm.Name, cfg.Metrics.Listen, err)
	}
	probe := func(what string, p *corev1.Probe, wantPath string) {
		if p == nil || p.HTTPGet == nil {
			c.fail("container mirrorgate: no %s with httpGet", what)
			return
		}
		if p.HTTPGet.Path != wantPath {
			c.fail("container mirrorgate: %s GETs %q, not %s", what, p.HTTPGet.Path, wantPath)
		}
		port, ok := containerPort(p.HTTPGet.Port, mg.Ports)
		if !ok || port != mport {
			c.fail("container mirrorgate: %s port %s is %d, not the metrics.listen port %d", what, p.HTTPGet.Port.String(), port, mport)
		}
	}
	probe("readinessProbe", mg.ReadinessProbe, "/ready")
	probe("livenessProbe", mg.LivenessProbe, "/health")

	// Shutdown: the grace period covers preStop and mirrorgate's own stop.
	preStop := int64(0)
	if l := mg.Lifecycle; l != nil && l.PreStop != nil {
		switch {
		case l.PreStop.Sleep != nil:
			preStop = l.PreStop.Sleep.Seconds
		case l.PreStop.Exec != nil && len(l.PreStop.Exec.Command) == 2 && l.PreStop.Exec.Command[0] == "sleep":
			preStop, err = strconv.ParseInt(l.PreStop.Exec.Command[1], 10, 64)
			if err != nil {
				c.fail("container mirrorgate: preStop %q: %v", l.PreStop.Exec.Command, err)
			}
		default:
			c.fail("container mirrorgate: preStop is neither a sleep nor `sleep N`")
		}
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.TerminationGracePeriodSeconds != nil {
		grace = *pod.TerminationGracePeriodSeconds
	}
	if grace < preStop+stopGraceSeconds {
		c.fail("terminationGracePeriodSeconds %d is less than preStop (%d s) plus mirrorgate's stop (%d s)", grace, preStop, stopGraceSeconds)
	}

	// Listeners: the Service's DNS name advertised, every port of the range on the Service.
	if len(cfg.Listeners) == 0 {
		c.fail("ConfigMap %s: no listeners", cm.Name)
	}
	svcNames := []string{svc.Name + "." + svc.Namespace + ".svc.cluster.local", svc.Name + "." + svc.Namespace + ".svc"}
	for _, l := range cfg.Listeners {
		if !slices.Contains(svcNames, l.AdvertisedHost) {
			c.fail("listener %s advertises %q, not the Service's name (%s)", l.Name, l.AdvertisedHost, strings.Join(svcNames, " or "))
		}
		first, last, err := portRange(l.PortRange)
		if err != nil {
			c.fail("listener %s: %v", l.Name, err)
			continue
		}
		for p := first; p <= last; p++ {
			found := false
			for _, sp := range svc.Spec.Ports {
				if sp.Port != p {
					continue
				}
				found = true
				target := sp.TargetPort
				if target.Type == intstr.Int && target.IntVal == 0 {
					target = intstr.FromInt32(sp.Port) // targetPort defaults to port
				}
				tp, ok := containerPort(target, mg.Ports)
				if !ok || tp != p {
					c.fail("Service %s: port %d goes to %s, not to port %d of the pods", svc.Name, p, target.String(), p)
				}
				if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
					c.fail("Service %s: port %d is %s, not TCP", svc.Name, p, sp.Protocol)
				}
			}
			if !found {
				c.fail("Service %s: no port %d (listener %s, %s)", svc.Name, p, l.Name, l.PortRange)
			}
		}
	}
	for _, sp := range svc.Spec.Ports {
		for _, m := range validation.IsValidPortName(sp.Name) {
			c.fail("Service %s: port name %q: %s", svc.Name, sp.Name, m)
		}
	}
	for _, cp := range mg.Ports {
		if cp.Name != "" {
			for _, m := range validation.IsValidPortName(cp.Name) {
				c.fail("container mirrorgate: port name %q: %s", cp.Name, m)
			}
		}
	}

	// Environment: literal values as they are, a pod field as an example value.
	for _, e := range mg.Env {
		switch {
		case e.ValueFrom == nil:
			c.res.Env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			c.res.Env[e.Name] = d.Name + "-5d4f8b7c9-x2kq7"
		default:
			c.fail("container mirrorgate: env %s: only values and metadata.name are checked here", e.Name)
		}
	}
}

// splitHostPort parses `ip:port` (IPv6 in brackets).
func splitHostPort(s string) (string, int32, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("not ip:port")
	}
	p, err := strconv.Atoi(s[i+1:])
	if err != nil || p <= 0 || p > 65535 {
		return "", 0, fmt.Errorf("not ip:port")
	}
	return strings.Trim(s[:i], "[]"), int32(p), nil
}
