package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/zkgate/zkgate/client"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/internal/harness/restartload"
)

// The chart's pods run as Kubernetes would run them, on loopback: helm
// template with the default values plus tokens and a peer secret (those of
// scripts/test-deploy.sh, the ensemble a test ZooKeeper), then each pod of
// the Deployment is its container's rendered args and env run as a process
// of the zkgate binary, with the rendered env alone. The rewrites, each mechanical and the least that
// loopback needs (see cluster.command):
//
//   - $(VAR) in the args is the env's VAR, as the kubelet expands it;
//     POD_IP (status.podIP) is the pod's own 127.0.0.x, a new one for each
//     new pod, as Kubernetes gives a new pod a new IP;
//   - 0.0.0.0 in an address is the pod's IP: in Kubernetes it is every
//     address of the pod's own network namespace, here all pods share one;
//   - a container port that the pod's IP has in use already is mapped to a
//     free one, in every address of the pod's IP;
//   - a path under a volume's mountPath is that path under the pod's own
//     temp dir, where the volume is materialised: an emptyDir empty, a
//     Secret's items as files of the secret's mode (the tokens file made
//     with zkgate token new, the peer secret with zkgate peer-secret new).
//
// The Service is a TCP proxy on 127.0.0.1 (its port as rendered, if free):
// each connection goes to the next of the ready pods, as kube-proxy sends
// it; a pod is ready from its first answered /readyz, polled every
// periodSeconds of its readinessProbe, and not from its SIGTERM on (a
// terminating pod leaves the Service's endpoints). The clients use the
// Service; a pod's own address is for the other pods (--advertise) and for
// the test's check that any pod serves any lease.
//
// What must hold: the 3 replicas start; a lease made through any pod keeps
// alive and takes holds through each of the others; and a rollout (each pod
// SIGTERMed in turn, its replacement started as the rendered strategy and
// PodDisruptionBudget allow, the next once the replacement is ready, the
// grace period the kill deadline) under 20 zkgate lock jobs and Go holders
// of every kind costs nothing: every job exits 0, no lease ends, no two
// holders overlap, no token changes (see restartload and
// gwtest.CheckRestarts).
func TestChartRollout(t *testing.T) {
	t.Parallel()
	zk := gwtest.ZK(t)
	m := renderChart(t, "--set", "zookeeper.ensemble="+zk.Addr(),
		"--set", "auth.existingSecret=zkgate-tokens", "--set", "peerSecret.existingSecret=zkgate-peer")
	secrets, token := chartSecrets(t)
	c := newCluster(t, m, secrets)
	if m.replicas != 3 {
		t.Fatalf("the chart renders %d replicas, not its default 3", m.replicas)
	}
	for range m.replicas {
		c.startPod(t)
	}
	anyPodServesAnyLease(t, c, token)

	gwtest.CheckRestarts(t, restartload.Config{URLs: []string{c.svc.url}, Gateways: m.replicas, Restart: c.replace, Rounds: 1,
		Token: token, Jobs: 20, JobLocks: 10, JobHold: 8 * time.Second, JobWait: time.Minute,
		Holders: 2, Hold: 300 * time.Millisecond, TTL: 30 * time.Second})
	for i, p := range c.current() {
		if exited, code := p.proc.Exited(); exited {
			t.Errorf("pod %d (%s) exited %d after the rollout", i, p.ip, code)
		}
	}
}

// anyPodServesAnyLease checks that a lease made through each pod keeps
// alive and takes holds through each of the others, by their own
// addresses.
func anyPodServesAnyLease(t *testing.T, c *cluster, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods := c.current()
	clients := make([]*client.Client, len(pods))
	for i, p := range pods {
		var err error
		if clients[i], err = client.New(p.proc.URL, client.WithToken(token)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range pods {
		info, err := clients[i].CreateLease(ctx, 30*time.Second, fmt.Sprintf("chart-made-at-%d", i))
		if err != nil {
			t.Fatalf("lease through pod %d: %v", i, err)
		}
		for j := range pods {
			if j == i {
				continue
			}
			name := fmt.Sprintf("chart-any-pod-%d-%d", i, j)
			if _, err := clients[j].KeepAlive(ctx, info.ID); err != nil {
				t.Errorf("keep pod %d's lease alive through pod %d: %v", i, j, err)
			}
			if _, err := clients[j].Lease(info.ID).Lock(ctx, name, client.Exclusive, 0); err != nil {
				t.Errorf("lock %s with pod %d's lease through pod %d: %v", name, i, j, err)
			}
			if _, err := clients[j].Lease(info.ID).AcquireSemaphore(ctx, name, 1, 0); err != nil {
				t.Errorf("semaphore %s with pod %d's lease through pod %d: %v", name, i, j, err)
			}
		}
		got, err := clients[i].LeaseInfo(ctx, info.ID)
		if err != nil || len(got.Holds) != 2*(len(pods)-1) {
			t.Errorf("pod %d's lease holds %+v (%v), not a lock and a slot through each other pod", i, got.Holds, err)
		}
		if err := clients[(i+1)%len(pods)].Lease(info.ID).Revoke(ctx); err != nil {
			t.Errorf("revoke pod %d's lease through another: %v", i, err)
		}
	}
}

// chartSecrets makes the Secrets that the values name, key by key: the
// tokens file of zkgate token new (a token for every name, to write), and
// the peer secret of zkgate peer-secret new. It returns them and the
// token.
func chartSecrets(t *testing.T) (map[string]map[string][]byte, string) {
	t.Helper()
	bin, dir := gwtest.Binary(t), t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	out, err := exec.Command(bin, "token", "new", "-q", "--auth-file", tokens, "--name", "chart-test", "*:*:write").Output()
	if err != nil {
		t.Fatalf("zkgate token new: %v", err)
	}
	token := strings.TrimSpace(string(out))
	file, err := os.ReadFile(tokens)
	if err != nil {
		t.Fatal(err)
	}
	peerSecret, err := exec.Command(bin, "peer-secret", "new").Output()
	if err != nil {
		t.Fatalf("zkgate peer-secret new: %v", err)
	}
	return map[string]map[string][]byte{"zkgate-tokens": {"tokens": file}, "zkgate-peer": {"secret": peerSecret}}, token
}

// rendered is what the test reads of the chart's manifest.
type rendered struct {
	replicas                 int
	maxUnavailable, maxSurge int // the Deployment's rolling update
	pdbMaxUnavailable        int // -1: no PodDisruptionBudget
	servicePort              int
	serviceTarget            string
	pod                      podSpec
}

type podSpec struct {
	TerminationGracePeriodSeconds int         `yaml:"terminationGracePeriodSeconds"`
	Containers                    []container `yaml:"containers"`
	Volumes                       []volume    `yaml:"volumes"`
}

type volume struct {
	Name     string    `yaml:"name"`
	EmptyDir *struct{} `yaml:"emptyDir"`
	Secret   *struct {
		SecretName  string `yaml:"secretName"`
		DefaultMode *int   `yaml:"defaultMode"`
		Items       []struct {
			Key  string `yaml:"key"`
			Path string `yaml:"path"`
		} `yaml:"items"`
	} `yaml:"secret"`
}

type container struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe struct {
		HTTPGet struct {
			Path   string      `yaml:"path"`
			Port   intOrString `yaml:"port"`
			Scheme string      `yaml:"scheme"`
		} `yaml:"httpGet"`
		PeriodSeconds int `yaml:"periodSeconds"`
	} `yaml:"readinessProbe"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// manifestDoc is what the test reads of a document of the manifest: a
// Deployment, a Service or a PodDisruptionBudget.
type manifestDoc struct {
	Kind string `yaml:"kind"`
	Spec struct {
		Replicas int `yaml:"replicas"`
		Strategy struct {
			Type          string `yaml:"type"`
			RollingUpdate *struct {
				MaxUnavailable intOrString `yaml:"maxUnavailable"`
				MaxSurge       intOrString `yaml:"maxSurge"`
			} `yaml:"rollingUpdate"`
		} `yaml:"strategy"`
		Template struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		MaxUnavailable *intOrString `yaml:"maxUnavailable"`
		Ports          []struct {
			Port       int         `yaml:"port"`
			TargetPort intOrString `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

// intOrString is a Kubernetes IntOrString, as written.
type intOrString string

func (v *intOrString) UnmarshalYAML(n *yaml.Node) error {
	*v = intOrString(n.Value)
	return nil
}

// count is v of replicas: a number, or a percentage (rounded up or down).
func (v intOrString) count(t *testing.T, replicas int, up bool) int {
	t.Helper()
	s := string(v)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("the chart renders %q for a count", s)
		}
		if up {
			return (n*replicas + 99) / 100
		}
		return n * replicas / 100
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("the chart renders %q for a count", s)
	}
	return n
}

// renderChart runs helm template on the chart with args (through
// scripts/gotool.sh, which builds the pinned helm once) and reads its
// Deployment, Service and PodDisruptionBudget.
func renderChart(t *testing.T, args ...string) rendered {
	t.Helper()
	cmdline := append([]string{"../scripts/gotool.sh", "helm", "template", "t", "helm/zkgate"}, args...)
	var stderr bytes.Buffer
	cmd := exec.Command(cmdline[0], cmdline[1:]...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the chart test needs helm: (cd deploy && %s) failed: %v\n%s", strings.Join(cmdline, " "), err, stderr.String())
	}
	var docs []manifestDoc
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var d manifestDoc
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("helm template's output: %v", err)
		}
		docs = append(docs, d)
	}
	m := rendered{pdbMaxUnavailable: -1}
	var kinds []string
	for _, d := range docs {
		kinds = append(kinds, d.Kind)
		switch d.Kind {
		case "Deployment":
			m.replicas, m.pod = d.Spec.Replicas, d.Spec.Template.Spec
			s := d.Spec.Strategy
			if s.Type != "RollingUpdate" || s.RollingUpdate == nil {
				t.Fatalf("the Deployment's strategy is %+v, not a RollingUpdate", s)
			}
			m.maxUnavailable = s.RollingUpdate.MaxUnavailable.count(t, m.replicas, false)
			m.maxSurge = s.RollingUpdate.MaxSurge.count(t, m.replicas, true)
		case "PodDisruptionBudget":
			if d.Spec.MaxUnavailable == nil {
				t.Fatal("the PodDisruptionBudget has no maxUnavailable")
			}
			m.pdbMaxUnavailable = d.Spec.MaxUnavailable.count(t, m.replicas, false)
		case "Service":
			if len(d.Spec.Ports) != 1 {
				t.Fatalf("the Service has ports %+v, not one", d.Spec.Ports)
			}
			m.servicePort, m.serviceTarget = d.Spec.Ports[0].Port, string(d.Spec.Ports[0].TargetPort)
		}
	}
	if len(m.pod.Containers) != 1 || m.servicePort == 0 {
		t.Fatalf("the chart renders %v, not a Deployment of one container and a Service", kinds)
	}
	return m
}

// cluster is the rendered Deployment's pods and its Service, on loopback.
type cluster struct {
	t       *testing.T
	m       rendered
	secrets map[string]map[string][]byte
	dir     string
	svc     *service

	mu     sync.Mutex
	pods   []*pod // each replica's pod now
	all    []*pod // every pod started: the Service's endpoints are those ready
	made   int    // pods started so far
	probes sync.WaitGroup
}

// pod is one pod of the Deployment: a zkgate process on an IP of its own.
type pod struct {
	n      int // the n-th pod started, from 0
	ip     string
	ports  map[string]int // container port name -> the port it is on
	proc   *gwtest.Proc
	ready  bool // in the Service's endpoints (c.mu)
	ending bool // SIGTERMed (c.mu)
	stop   chan struct{}
}

// firstPodIP is the last byte of the first pod's IP: 127.0.0.2, then one
// more for each pod.
const firstPodIP = 2

func newCluster(t *testing.T, m rendered, secrets map[string]map[string][]byte) *cluster {
	t.Helper()
	c := &cluster{t: t, m: m, secrets: secrets, dir: t.TempDir()}
	// The IPs of the pods and of their replacements must be bindable.
	for i := range 2 * m.replicas {
		ip := fmt.Sprintf("127.0.0.%d", firstPodIP+i)
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Fatalf("the chart test gives each pod an IP of its own on loopback, and %s cannot be bound: %v", ip, err)
		}
		ln.Close()
	}
	if pc := m.pod.Containers[0]; len(pc.Command) > 0 {
		t.Fatalf("the container renders a command, %q: the test runs the image's entrypoint, zkgate, with the args", pc.Command)
	}
	c.svc = startService(t, m.servicePort, c.endpoint)
	t.Cleanup(func() {
		c.mu.Lock()
		for _, p := range c.all {
			p.leave()
		}
		c.mu.Unlock()
		c.probes.Wait()
	})
	return c
}

// current is each replica's pod now.
func (c *cluster) current() []*pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.pods)
}

// endpoint is the address of the next ready pod after the k-th (the
// Service's round robin), or "" with none ready.
func (c *cluster) endpoint(k int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ready []string
	for _, p := range c.all {
		if p.ready {
			ready = append(ready, net.JoinHostPort(p.ip, strconv.Itoa(p.ports[c.m.serviceTarget])))
		}
	}
	if len(ready) == 0 {
		return ""
	}
	return ready[k%len(ready)]
}

// leave takes p out of the Service's endpoints and stops its probe (c.mu).
func (p *pod) leave() {
	p.ready, p.ending = false, true
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
}

// startPod starts a new pod (on the next IP) and returns it once ready;
// the caller puts it among the replicas.
func (c *cluster) startPod(t *testing.T) *pod {
	t.Helper()
	c.mu.Lock()
	n := c.made
	c.made++
	c.mu.Unlock()
	p := &pod{n: n, ip: fmt.Sprintf("127.0.0.%d", firstPodIP+n), ports: map[string]int{}, stop: make(chan struct{})}
	args, env := c.command(t, p, filepath.Join(c.dir, fmt.Sprintf("pod-%d", n)))
	start := time.Now()
	p.proc = gwtest.StartArgs(t, args, env, nil)
	t.Logf("pod %d (%s) ready in %s", n, p.ip, time.Since(start).Round(time.Millisecond))
	c.mu.Lock()
	p.ready = true
	c.all = append(c.all, p)
	if len(c.pods) < c.m.replicas {
		c.pods = append(c.pods, p)
	}
	c.mu.Unlock()
	c.probes.Add(1)
	go c.probe(p)
	return p
}

// probe is the kubelet's readiness probe of p: /readyz every periodSeconds
// (timeoutSeconds 1, the default), p among the Service's endpoints while
// it answers 200, until p is SIGTERMed or exits.
func (c *cluster) probe(p *pod) {
	defer c.probes.Done()
	rp := c.m.pod.Containers[0].ReadinessProbe
	hc := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(time.Duration(rp.PeriodSeconds) * time.Second)
	defer tick.Stop()
	url := fmt.Sprintf("http://%s%s", net.JoinHostPort(p.ip, strconv.Itoa(p.ports[string(rp.HTTPGet.Port)])), rp.HTTPGet.Path)
	for {
		select {
		case <-p.stop:
			return
		case <-p.proc.Done():
			return
		case <-tick.C:
		}
		ok := false
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			ok = resp.StatusCode == http.StatusOK
		}
		c.mu.Lock()
		if !p.ending {
			p.ready = ok
		}
		c.mu.Unlock()
	}
}

// replace is the rollout's step for replica i: its pod SIGTERMed and a
// new pod started with the same rendered args (on a new IP), in the order
// that the rendered strategy and PodDisruptionBudget allow, returning once
// the new pod is ready and the old one has exited (SIGKILLed, an error,
// if it outlives the grace period).
func (c *cluster) replace(_ context.Context, i int) error {
	t := c.t
	unavailable := c.m.maxUnavailable
	if c.m.pdbMaxUnavailable >= 0 {
		unavailable = min(unavailable, c.m.pdbMaxUnavailable)
	}
	c.mu.Lock()
	old := c.pods[i]
	c.mu.Unlock()
	grace := time.Duration(c.m.pod.TerminationGracePeriodSeconds) * time.Second
	var stopped time.Time
	terminate := func() {
		c.mu.Lock()
		old.leave()
		c.mu.Unlock()
		stopped = time.Now()
		old.proc.Terminate()
	}
	var exitErr error
	exited := func() {
		select {
		case <-old.proc.Done():
		case <-time.After(time.Until(stopped.Add(grace))):
			old.proc.Kill()
			exitErr = fmt.Errorf("pod %d (%s) did not exit within its grace period (%s) of SIGTERM: SIGKILLed", old.n, old.ip, grace)
			return
		}
		if _, code := old.proc.Exited(); code != 0 {
			exitErr = fmt.Errorf("pod %d (%s) exited %d on SIGTERM", old.n, old.ip, code)
		}
		t.Logf("pod %d (%s) exited %s after SIGTERM", old.n, old.ip, time.Since(stopped).Round(time.Millisecond))
	}
	var p *pod
	switch {
	case unavailable >= 1 && c.m.maxSurge >= 1: // both at once
		terminate()
		p = c.startPod(t)
		exited()
	case unavailable >= 1: // no surge: the old pod goes first
		terminate()
		exited()
		p = c.startPod(t)
	case c.m.maxSurge >= 1: // none unavailable: the new pod is ready first
		p = c.startPod(t)
		terminate()
		exited()
	default:
		return fmt.Errorf("the strategy allows neither a pod unavailable nor one more (maxUnavailable %d, maxSurge %d)", unavailable, c.m.maxSurge)
	}
	c.mu.Lock()
	c.pods[i] = p
	c.mu.Unlock()
	return exitErr
}

// envRef is a $(VAR) of a container's args or env.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// command is the container's rendered args and env as pod p runs them,
// its volumes materialised under root (see TestChartRollout for each
// rewrite); it sets p.ports.
func (c *cluster) command(t *testing.T, p *pod, root string) (args, env []string) {
	t.Helper()
	ctr := c.m.pod.Containers[0]
	vars := map[string]string{}
	expand := func(s string) string {
		return envRef.ReplaceAllStringFunc(s, func(ref string) string {
			if v, ok := vars[envRef.FindStringSubmatch(ref)[1]]; ok {
				return v
			}
			return ref
		})
	}
	for _, e := range ctr.Env {
		v := expand(e.Value)
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
				t.Fatalf("env %s: the test knows no value but status.podIP's", e.Name)
			}
			v = p.ip
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	// The container's ports: as rendered where the pod's IP has them free.
	mapped := map[int]int{}
	for _, cp := range ctr.Ports {
		port := cp.ContainerPort
		ln, err := net.Listen("tcp", net.JoinHostPort(p.ip, strconv.Itoa(port)))
		if err != nil {
			ln, err = net.Listen("tcp", p.ip+":0")
			if err != nil {
				t.Fatal(err)
			}
			port = ln.Addr().(*net.TCPAddr).Port
			mapped[cp.ContainerPort] = port
		}
		ln.Close()
		p.ports[cp.Name], p.ports[strconv.Itoa(cp.ContainerPort)] = port, port
	}
	mounts := c.materialise(t, ctr, root)
	for _, a := range ctr.Args {
		b := strings.ReplaceAll(expand(a), "0.0.0.0:", p.ip+":")
		for from, to := range mapped {
			b = regexp.MustCompile(regexp.QuoteMeta(p.ip+":"+strconv.Itoa(from))+`\b`).ReplaceAllString(b, p.ip+":"+strconv.Itoa(to))
		}
		flag, value, isFlag := strings.Cut(b, "=")
		if !isFlag {
			flag, value = "", b
		}
		for _, m := range mounts {
			if value == m || strings.HasPrefix(value, m+"/") {
				value = filepath.Join(root, value)
				break
			}
		}
		if isFlag {
			b = flag + "=" + value
		} else {
			b = value
		}
		if b != a {
			t.Logf("pod %d: %s -> %s", p.n, a, b)
		}
		args = append(args, b)
	}
	return args, env
}

// materialise makes the container's volumes under root, at their
// mountPaths: an emptyDir empty, a Secret's items (or every key) files of
// its defaultMode (0644, Kubernetes' default); it returns the mountPaths.
func (c *cluster) materialise(t *testing.T, ctr container, root string) []string {
	t.Helper()
	var mounts []string
	for _, vm := range ctr.VolumeMounts {
		i := slices.IndexFunc(c.m.pod.Volumes, func(v volume) bool { return v.Name == vm.Name })
		if i < 0 {
			t.Fatalf("volume mount %s names no volume", vm.Name)
		}
		vol, dir := c.m.pod.Volumes[i], filepath.Join(root, vm.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		mounts = append(mounts, vm.MountPath)
		switch {
		case vol.EmptyDir != nil:
		case vol.Secret != nil:
			data, ok := c.secrets[vol.Secret.SecretName]
			if !ok {
				t.Fatalf("the chart mounts the Secret %s, which the test does not make", vol.Secret.SecretName)
			}
			mode := os.FileMode(0o644)
			if vol.Secret.DefaultMode != nil {
				mode = os.FileMode(*vol.Secret.DefaultMode)
				if mode&^0o777 != 0 {
					t.Fatalf("Secret volume %s: defaultMode %o", vol.Name, mode)
				}
			}
			files := map[string]string{}
			for k := range data {
				files[k] = k
			}
			if len(vol.Secret.Items) > 0 {
				files = map[string]string{}
				for _, it := range vol.Secret.Items {
					files[it.Key] = it.Path
				}
			}
			for key, path := range files {
				v, ok := data[key]
				if !ok {
					t.Fatalf("the chart mounts the key %s of the Secret %s, which has %v", key, vol.Secret.SecretName, slices.Sorted(maps.Keys(data)))
				}
				if err := os.WriteFile(filepath.Join(dir, path), v, mode); err != nil {
					t.Fatal(err)
				}
			}
		default:
			t.Fatalf("volume %s is neither an emptyDir nor a Secret", vol.Name)
		}
	}
	// The longest first: a path under two of them is under the deeper.
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
	return mounts
}

// service is the Service: a TCP proxy that sends each connection to the
// endpoint of its turn (round robin over the ready pods), for as long as
// both ends keep it.
type service struct {
	url      string
	ln       net.Listener
	endpoint func(k int) string

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// startService listens on 127.0.0.1:port if free (another port if not);
// it stops at the end of the test.
func startService(t *testing.T, port int, endpoint func(k int) string) *service {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Logf("the Service's port %d is in use on 127.0.0.1: it is %s", port, ln.Addr())
	}
	s := &service{url: "http://" + ln.Addr().String(), ln: ln, endpoint: endpoint, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.conns = nil
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *service) serve() {
	defer s.wg.Done()
	for k := 0; ; k++ {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.forward(c, k)
		}()
	}
}

// track keeps c for the Service's end; false once it has ended.
func (s *service) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		return false
	}
	s.conns[c] = true
	return true
}

func (s *service) untrack(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// forward passes the k-th connection to its endpoint: with none ready, or
// one that refuses, the connection is closed.
func (s *service) forward(c net.Conn, k int) {
	defer c.Close()
	if !s.track(c) {
		return
	}
	defer s.untrack(c)
	addr := s.endpoint(k)
	if addr == "" {
		return
	}
	b, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return
	}
	defer b.Close()
	if !s.track(b) {
		return
	}
	defer s.untrack(b)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(b, c)
		_ = b.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(c, b)
	c.Close()
	<-done
}
