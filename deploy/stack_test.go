package deploy

import (
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/freeagent-build/freeagent/internal/config"
)

// composeService is the part of a compose service the checks read.
type composeService struct {
	Image       string
	EnvFile     string `yaml:"env_file"`
	Environment map[string]string
	Healthcheck struct{ Test []string }
	Ports       []string
	Volumes     []string
	DependsOn   map[string]struct{ Condition string } `yaml:"depends_on"`
}

// The compose example parses (anchors and merge keys resolved), runs two
// controller replicas of the image with their secrets from the env file,
// on the stack's PostgreSQL and MinIO, behind a TLS proxy that balances
// over both and checks /health/ready.
func TestComposeStack(t *testing.T) {
	var doc struct {
		Services map[string]yaml.Node
	}
	readYAML(t, "compose/compose.yml", &doc)
	services := map[string]composeService{}
	var controllers []string
	for name, node := range doc.Services {
		var s composeService
		if err := node.Decode(&s); err != nil {
			// depends_on may be a list (caddy's): decode that service loosely.
			var loose struct {
				Image   string
				Ports   []string
				Volumes []string
			}
			if err := node.Decode(&loose); err != nil {
				t.Fatalf("service %s: %v", name, err)
			}
			s = composeService{Image: loose.Image, Ports: loose.Ports, Volumes: loose.Volumes}
		}
		services[name] = s
		if strings.HasPrefix(s.Image, "freeagent-controller:") {
			controllers = append(controllers, name)
		}
	}
	slices.Sort(controllers)
	if len(controllers) != 2 {
		t.Fatalf("want two controller replicas, have %v", controllers)
	}
	for _, name := range controllers {
		s := services[name]
		db, err := url.Parse(strings.ReplaceAll(s.Environment["DATABASE_URL"], "${POSTGRES_PASSWORD:?set in freeagent.env}", "pw"))
		if err != nil || db.Hostname() != "postgres" {
			t.Errorf("%s: DATABASE_URL %q does not name the postgres service", name, s.Environment["DATABASE_URL"])
		}
		blob, err := url.Parse(s.Environment["FREEAGENT_BLOB_STORE"])
		if err != nil || blob.Scheme != "s3" {
			t.Fatalf("%s: FREEAGENT_BLOB_STORE %q", name, s.Environment["FREEAGENT_BLOB_STORE"])
		}
		if ep, err := url.Parse(blob.Query().Get("endpoint")); err != nil || ep.Hostname() != "minio" {
			t.Errorf("%s: the blob store's endpoint is not the minio service", name)
		}
		if s.EnvFile != "freeagent.env" || s.Environment["FREEAGENT_ADVERTISE_URL"] != "http://"+name+":8080" {
			t.Errorf("%s: env_file %q, advertise URL %q", name, s.EnvFile, s.Environment["FREEAGENT_ADVERTISE_URL"])
		}
		for _, secret := range []string{"FREEAGENT_CERTS_KEY", "FREEAGENT_LINK_KEY", "AWS_SECRET_ACCESS_KEY"} {
			if _, ok := s.Environment[secret]; ok {
				t.Errorf("%s: %s is written in compose.yml; it belongs in freeagent.env", name, secret)
			}
		}
		if !slices.Equal(s.Healthcheck.Test, []string{"CMD", "/usr/local/bin/freeagent-controller", "health"}) {
			t.Errorf("%s: healthcheck %v", name, s.Healthcheck.Test)
		}
		trustsProxy(t, name, s.Environment["FREEAGENT_TRUSTED_PROXIES"], "172.18.0.5") // Caddy on a Docker network
		if s.DependsOn["postgres"].Condition != "service_healthy" {
			t.Errorf("%s: does not wait for a healthy postgres", name)
		}
	}
	for _, want := range []string{"postgres", "minio", "caddy"} {
		if _, ok := services[want]; !ok {
			t.Errorf("no %s service", want)
		}
	}
	if !slices.Contains(services["caddy"].Ports, "443:443") {
		t.Errorf("caddy does not publish 443: %v", services["caddy"].Ports)
	}
	caddy, err := os.ReadFile("compose/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	proxy := regexp.MustCompile(`reverse_proxy ([^{]+)\{`).FindStringSubmatch(string(caddy))
	if proxy == nil || !strings.Contains(string(caddy), "health_uri /health/ready") {
		t.Fatalf("Caddyfile: %s", caddy)
	}
	var upstreams []string
	for _, u := range strings.Fields(proxy[1]) {
		upstreams = append(upstreams, strings.TrimSuffix(u, ":8080"))
	}
	slices.Sort(upstreams)
	if !slices.Equal(upstreams, controllers) {
		t.Errorf("Caddy balances over %v, the replicas are %v", upstreams, controllers)
	}
	example, err := os.ReadFile("compose/freeagent.env.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"FREEAGENT_CERTS_KEY=", "FREEAGENT_LINK_KEY=", "POSTGRES_PASSWORD=", "AWS_SECRET_ACCESS_KEY=", "FREEAGENT_HOST="} {
		if !strings.Contains(string(example), "\n"+v) {
			t.Errorf("freeagent.env.example does not name %s", v)
		}
	}
}

// k8sObject is the part of the manifests the checks read; decoding is
// strict for the fields named here, so a misspelt key there fails.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string
	Metadata   struct{ Name string }
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Replicas *int
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		}
		Ports []struct {
			Name       string
			Port       int
			TargetPort string `yaml:"targetPort"`
		}
		Template struct {
			Metadata struct{ Labels map[string]string }
			Spec     struct {
				SecurityContext struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
					RunAsUser    int  `yaml:"runAsUser"`
				} `yaml:"securityContext"`
				Containers []struct {
					Name  string
					Image string
					Args  []string
					Ports []struct {
						Name          string
						ContainerPort int `yaml:"containerPort"`
					}
					EnvFrom []struct {
						SecretRef struct{ Name string } `yaml:"secretRef"`
					} `yaml:"envFrom"`
					Env            []struct{ Name, Value string }
					ReadinessProbe struct {
						HTTPGet struct {
							Path string
							Port string
						} `yaml:"httpGet"`
					} `yaml:"readinessProbe"`
				}
			}
		}
	}
}

// The Kubernetes example: a Deployment of two replicas of the image,
// ready on /health/ready, its secrets from the Secret, which holds every
// key the controller needs; a Service that selects its pods.
func TestKubernetesManifests(t *testing.T) {
	f, err := os.Open("k8s/freeagent-controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs := map[string]k8sObject{}
	var serviceSelector map[string]string
	dec := yaml.NewDecoder(f)
	for {
		var node yaml.Node
		if err := dec.Decode(&node); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatal(err)
		}
		var o k8sObject
		if err := node.Decode(&o); err != nil {
			t.Fatal(err)
		}
		objs[o.Kind] = o
		if o.Kind == "Service" {
			var svc struct {
				Spec struct{ Selector map[string]string }
			}
			if err := node.Decode(&svc); err != nil {
				t.Fatal(err)
			}
			serviceSelector = svc.Spec.Selector
		}
	}
	want := map[string]string{"Secret": "v1", "Deployment": "apps/v1", "Service": "v1"}
	for kind, api := range want {
		if objs[kind].APIVersion != api || objs[kind].Metadata.Name != "freeagent-controller" {
			t.Fatalf("%s: %+v", kind, objs[kind])
		}
	}
	d := objs["Deployment"]
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("replicas: %v", d.Spec.Replicas)
	}
	if len(d.Spec.Selector.MatchLabels) == 0 || len(serviceSelector) == 0 {
		t.Fatalf("selectors: deployment %v, service %v", d.Spec.Selector.MatchLabels, serviceSelector)
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("selector label %s=%s not on the pod template", k, v)
		}
	}
	for k, v := range serviceSelector {
		if d.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the pods do not carry", k, v)
		}
	}
	pod := d.Spec.Template.Spec
	if !pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.RunAsUser != 65532 || len(pod.Containers) != 1 {
		t.Fatalf("pod: %+v", pod)
	}
	c := pod.Containers[0]
	if !strings.Contains(c.Image, "freeagent-controller:") || !slices.Equal(c.Args, []string{"serve"}) {
		t.Errorf("container image %q args %v", c.Image, c.Args)
	}
	if c.ReadinessProbe.HTTPGet.Path != "/health/ready" || c.ReadinessProbe.HTTPGet.Port != "http" ||
		len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("readiness %+v on ports %+v", c.ReadinessProbe, c.Ports)
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != "freeagent-controller" {
		t.Errorf("envFrom: %+v", c.EnvFrom)
	}
	for _, e := range c.Env {
		if strings.HasSuffix(e.Name, "_KEY") || e.Name == "DATABASE_URL" {
			t.Errorf("secret %s set in plain env", e.Name)
		}
		if e.Name == "FREEAGENT_LISTEN" && e.Value != "0.0.0.0:8080" {
			t.Errorf("listen %s", e.Value)
		}
		if e.Name == "FREEAGENT_TRUSTED_PROXIES" {
			trustsProxy(t, "the Deployment", e.Value, "10.244.1.7") // an ingress pod
		}
	}
	if !slices.ContainsFunc(c.Env, func(e struct{ Name, Value string }) bool { return e.Name == "FREEAGENT_TRUSTED_PROXIES" }) {
		t.Error("the Deployment sets no FREEAGENT_TRUSTED_PROXIES: behind the ingress every client would share one failed-authentication budget")
	}
	for _, k := range []string{"DATABASE_URL", "FREEAGENT_CERTS_KEY", "FREEAGENT_LINK_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if _, ok := objs["Secret"].StringData[k]; !ok {
			t.Errorf("the Secret does not hold %s", k)
		}
	}
	svc := objs["Service"].Spec
	if len(svc.Ports) != 1 || svc.Ports[0].TargetPort != "http" {
		t.Errorf("service ports: %+v", svc.Ports)
	}
}

// trustsProxy fails unless setting (FREEAGENT_TRUSTED_PROXIES) parses as
// the controller reads it and covers the proxy's address: without it,
// every client behind the proxy shares one budget of failed authentications.
func trustsProxy(t *testing.T, where, setting, proxy string) {
	t.Helper()
	prefixes, err := config.ParsePrefixes(setting)
	if err != nil || !slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(netip.MustParseAddr(proxy)) }) {
		t.Errorf("%s: FREEAGENT_TRUSTED_PROXIES %q does not cover the proxy at %s (%v)", where, setting, proxy, err)
	}
}
