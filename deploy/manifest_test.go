package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The types below mirror the part of the Kubernetes API the manifests use.
// Documents are decoded into them with unknown fields rejected, so a
// misspelled field (concurencyPolicy) fails here instead of being dropped
// by a lenient client. When a manifest needs a field that is not here, add
// it, spelled as in the Kubernetes API reference.

type objectMeta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type cronJob struct {
	APIVersion string      `yaml:"apiVersion"`
	Kind       string      `yaml:"kind"`
	Metadata   objectMeta  `yaml:"metadata"`
	Spec       cronJobSpec `yaml:"spec"`
}

type cronJobSpec struct {
	Schedule                   string      `yaml:"schedule"`
	TimeZone                   *string     `yaml:"timeZone"`
	ConcurrencyPolicy          string      `yaml:"concurrencyPolicy"`
	StartingDeadlineSeconds    *int64      `yaml:"startingDeadlineSeconds"`
	SuccessfulJobsHistoryLimit *int32      `yaml:"successfulJobsHistoryLimit"`
	FailedJobsHistoryLimit     *int32      `yaml:"failedJobsHistoryLimit"`
	Suspend                    *bool       `yaml:"suspend"`
	JobTemplate                jobTemplate `yaml:"jobTemplate"`
}

type jobTemplate struct {
	Metadata objectMeta `yaml:"metadata"`
	Spec     jobSpec    `yaml:"spec"`
}

type job struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       jobSpec    `yaml:"spec"`
}

type jobSpec struct {
	CompletionMode          string            `yaml:"completionMode"`
	Completions             *int32            `yaml:"completions"`
	Parallelism             *int32            `yaml:"parallelism"`
	BackoffLimit            *int32            `yaml:"backoffLimit"`
	BackoffLimitPerIndex    *int32            `yaml:"backoffLimitPerIndex"`
	MaxFailedIndexes        *int32            `yaml:"maxFailedIndexes"`
	ActiveDeadlineSeconds   *int64            `yaml:"activeDeadlineSeconds"`
	TTLSecondsAfterFinished *int32            `yaml:"ttlSecondsAfterFinished"`
	PodFailurePolicy        *podFailurePolicy `yaml:"podFailurePolicy"`
	Template                podTemplate       `yaml:"template"`
}

type podFailurePolicy struct {
	Rules []struct {
		Action      string `yaml:"action"`
		OnExitCodes *struct {
			ContainerName string  `yaml:"containerName"`
			Operator      string  `yaml:"operator"`
			Values        []int32 `yaml:"values"`
		} `yaml:"onExitCodes"`
		OnPodConditions []struct {
			Type   string `yaml:"type"`
			Status string `yaml:"status"`
		} `yaml:"onPodConditions"`
	} `yaml:"rules"`
}

type podTemplate struct {
	Metadata objectMeta `yaml:"metadata"`
	Spec     podSpec    `yaml:"spec"`
}

type podSpec struct {
	RestartPolicy                 string              `yaml:"restartPolicy"`
	ServiceAccountName            string              `yaml:"serviceAccountName"`
	AutomountServiceAccountToken  *bool               `yaml:"automountServiceAccountToken"`
	TerminationGracePeriodSeconds *int64              `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               *podSecurityContext `yaml:"securityContext"`
	Containers                    []container         `yaml:"containers"`
	Volumes                       []volume            `yaml:"volumes"`
}

type volume struct {
	Name   string `yaml:"name"`
	Secret *struct {
		SecretName  string      `yaml:"secretName"`
		Items       []keyToPath `yaml:"items"`
		DefaultMode *int32      `yaml:"defaultMode"`
		Optional    *bool       `yaml:"optional"`
	} `yaml:"secret"`
	ConfigMap *struct {
		Name        string      `yaml:"name"`
		Items       []keyToPath `yaml:"items"`
		DefaultMode *int32      `yaml:"defaultMode"`
		Optional    *bool       `yaml:"optional"`
	} `yaml:"configMap"`
	EmptyDir *struct {
		Medium    string `yaml:"medium"`
		SizeLimit string `yaml:"sizeLimit"`
	} `yaml:"emptyDir"`
}

type keyToPath struct {
	Key  string `yaml:"key"`
	Path string `yaml:"path"`
	Mode *int32 `yaml:"mode"`
}

type podSecurityContext struct {
	RunAsNonRoot   *bool           `yaml:"runAsNonRoot"`
	RunAsUser      *int64          `yaml:"runAsUser"`
	RunAsGroup     *int64          `yaml:"runAsGroup"`
	FSGroup        *int64          `yaml:"fsGroup"`
	SeccompProfile *seccompProfile `yaml:"seccompProfile"`
}

type seccompProfile struct {
	Type string `yaml:"type"`
}

type container struct {
	Name            string                    `yaml:"name"`
	Image           string                    `yaml:"image"`
	ImagePullPolicy string                    `yaml:"imagePullPolicy"`
	Command         []string                  `yaml:"command"`
	Args            []string                  `yaml:"args"`
	Env             []envVar                  `yaml:"env"`
	EnvFrom         []envFromSource           `yaml:"envFrom"`
	Resources       resources                 `yaml:"resources"`
	SecurityContext *containerSecurityContext `yaml:"securityContext"`
	Ports           []containerPort           `yaml:"ports"`
	VolumeMounts    []volumeMount             `yaml:"volumeMounts"`
	ReadinessProbe  *probe                    `yaml:"readinessProbe"`
	LivenessProbe   *probe                    `yaml:"livenessProbe"`
	StartupProbe    *probe                    `yaml:"startupProbe"`
}

type containerPort struct {
	Name          string `yaml:"name"`
	ContainerPort int32  `yaml:"containerPort"`
	Protocol      string `yaml:"protocol"`
}

type volumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
	SubPath   string `yaml:"subPath"`
	ReadOnly  *bool  `yaml:"readOnly"`
}

// intOrString is a port given by number (8080) or by name (http); YAML's
// scalar text either way.
type intOrString string

type probe struct {
	HTTPGet *struct {
		Path   string      `yaml:"path"`
		Port   intOrString `yaml:"port"`
		Scheme string      `yaml:"scheme"`
	} `yaml:"httpGet"`
	InitialDelaySeconds *int32 `yaml:"initialDelaySeconds"`
	PeriodSeconds       *int32 `yaml:"periodSeconds"`
	TimeoutSeconds      *int32 `yaml:"timeoutSeconds"`
	SuccessThreshold    *int32 `yaml:"successThreshold"`
	FailureThreshold    *int32 `yaml:"failureThreshold"`
}

type envVar struct {
	Name      string  `yaml:"name"`
	Value     *string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef    *keyRef `yaml:"secretKeyRef"`
		ConfigMapKeyRef *keyRef `yaml:"configMapKeyRef"`
	} `yaml:"valueFrom"`
}

type keyRef struct {
	Name     string `yaml:"name"`
	Key      string `yaml:"key"`
	Optional *bool  `yaml:"optional"`
}

type envFromSource struct {
	Prefix    string `yaml:"prefix"`
	SecretRef *struct {
		Name     string `yaml:"name"`
		Optional *bool  `yaml:"optional"`
	} `yaml:"secretRef"`
	ConfigMapRef *struct {
		Name     string `yaml:"name"`
		Optional *bool  `yaml:"optional"`
	} `yaml:"configMapRef"`
}

type resources struct {
	Requests map[string]string `yaml:"requests"`
	Limits   map[string]string `yaml:"limits"`
}

type containerSecurityContext struct {
	AllowPrivilegeEscalation *bool           `yaml:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   *bool           `yaml:"readOnlyRootFilesystem"`
	RunAsNonRoot             *bool           `yaml:"runAsNonRoot"`
	RunAsUser                *int64          `yaml:"runAsUser"`
	RunAsGroup               *int64          `yaml:"runAsGroup"`
	SeccompProfile           *seccompProfile `yaml:"seccompProfile"`
	Capabilities             *struct {
		Add  []string `yaml:"add"`
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
}

type deployment struct {
	APIVersion string         `yaml:"apiVersion"`
	Kind       string         `yaml:"kind"`
	Metadata   objectMeta     `yaml:"metadata"`
	Spec       deploymentSpec `yaml:"spec"`
}

type deploymentSpec struct {
	Replicas             *int32 `yaml:"replicas"`
	RevisionHistoryLimit *int32 `yaml:"revisionHistoryLimit"`
	Selector             struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Strategy *struct {
		Type          string `yaml:"type"`
		RollingUpdate *struct {
			MaxSurge       intOrString `yaml:"maxSurge"`
			MaxUnavailable intOrString `yaml:"maxUnavailable"`
		} `yaml:"rollingUpdate"`
	} `yaml:"strategy"`
	Template podTemplate `yaml:"template"`
}

type service struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		Type     string            `yaml:"type"`
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string      `yaml:"name"`
			Port       int32       `yaml:"port"`
			TargetPort intOrString `yaml:"targetPort"`
			Protocol   string      `yaml:"protocol"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type secret struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   objectMeta        `yaml:"metadata"`
	Type       string            `yaml:"type"`
	StringData map[string]string `yaml:"stringData"`
	Data       map[string]string `yaml:"data"`
}

type kustomization struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Namespace  string   `yaml:"namespace"`
	Resources  []string `yaml:"resources"`
	Images     []struct {
		Name    string `yaml:"name"`
		NewName string `yaml:"newName"`
		NewTag  string `yaml:"newTag"`
		Digest  string `yaml:"digest"`
	} `yaml:"images"`
}

// railwayCron is railway.cron.yml.
type railwayCron struct {
	Jobs []struct {
		Name     string `yaml:"name"`
		Schedule string `yaml:"schedule"`
		Command  string `yaml:"command"`
	} `yaml:"jobs"`
}

// workload is a pod template found in a manifest: a CronJob's or a Job's.
type workload struct {
	file     string
	kind     string // CronJob or Job
	name     string
	cronSpec *cronJobSpec // nil for a Job
	job      jobSpec
}

func (w workload) String() string { return fmt.Sprintf("%s %s/%s", w.file, w.kind, w.name) }

// server is a Deployment: a long-running service (the console), not a run.
type server struct {
	file string
	name string
	spec deploymentSpec
}

func (s server) String() string { return fmt.Sprintf("%s Deployment/%s", s.file, s.name) }

// manifests is everything under k8s/, decoded.
type manifests struct {
	workloads      []workload
	servers        []server
	services       []fileService
	secrets        map[string][]secret // by file
	kustomizations map[string]kustomization
}

type fileService struct {
	file string
	service
}

func (s fileService) String() string { return fmt.Sprintf("%s Service/%s", s.file, s.Metadata.Name) }

// pods are the pod templates of every workload and server, by where they are.
func (m manifests) pods() map[string]podSpec {
	pods := map[string]podSpec{}
	for _, w := range m.workloads {
		pods[w.String()] = w.job.Template.Spec
	}
	for _, s := range m.servers {
		pods[s.String()] = s.spec.Template.Spec
	}
	return pods
}

// decodeDocuments parses every YAML document in data (empty ones dropped),
// rejecting what YAML rejects (tabs for indentation) and duplicate keys.
func decodeDocuments(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(n.Content) == 0 || n.Content[0].Tag == "!!null" { // an empty document (a trailing ---)
			continue
		}
		// Decoding into a generic value is where yaml.v3 reports duplicate
		// keys; a Node keeps both.
		var generic any
		if err := n.Decode(&generic); err != nil {
			return nil, err
		}
		docs = append(docs, &n)
	}
}

// strict decodes node into v with unknown fields rejected.
func strict(node *yaml.Node, v any) error {
	raw, err := yaml.Marshal(node)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	return dec.Decode(v)
}

func loadManifests(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "k8s", "*"))
	if err != nil {
		t.Fatal(err)
	}
	m := manifests{secrets: map[string][]secret{}, kustomizations: map[string]kustomization{}}
	seen := map[string]string{}
	for _, path := range files {
		file := filepath.Base(path)
		if filepath.Ext(file) != ".yaml" {
			t.Errorf("k8s/%s: every file in deploy/k8s is a manifest ending in .yaml", file)
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := decodeDocuments(data)
		if err != nil {
			t.Errorf("k8s/%s is not valid YAML: %v", file, err)
			continue
		}
		if len(docs) == 0 {
			t.Errorf("k8s/%s holds no document", file)
		}
		for _, doc := range docs {
			var head struct {
				APIVersion string     `yaml:"apiVersion"`
				Kind       string     `yaml:"kind"`
				Metadata   objectMeta `yaml:"metadata"`
			}
			if err := doc.Decode(&head); err != nil {
				t.Errorf("k8s/%s: %v", file, err)
				continue
			}
			if head.Kind != "Kustomization" {
				key := head.Kind + "/" + head.Metadata.Name
				if head.Metadata.Name == "" {
					t.Errorf("k8s/%s: a %s without metadata.name", file, head.Kind)
				} else if other, dup := seen[key]; dup {
					t.Errorf("k8s/%s: %s is also defined in %s", file, key, other)
				}
				seen[key] = file
			}
			wantAPI := map[string]string{"CronJob": "batch/v1", "Job": "batch/v1", "Deployment": "apps/v1",
				"Service": "v1", "Secret": "v1", "Kustomization": "kustomize.config.k8s.io/v1beta1"}[head.Kind]
			if wantAPI == "" {
				t.Errorf("k8s/%s: kind %q: the test knows CronJob, Job, Deployment, Service, Secret and Kustomization; teach it the new kind", file, head.Kind)
				continue
			}
			if head.APIVersion != wantAPI {
				t.Errorf("k8s/%s: %s has apiVersion %q, want %q", file, head.Kind, head.APIVersion, wantAPI)
			}
			switch head.Kind {
			case "CronJob":
				var cj cronJob
				if err := strict(doc, &cj); err != nil {
					t.Errorf("k8s/%s: CronJob %s: %v", file, head.Metadata.Name, err)
					continue
				}
				m.workloads = append(m.workloads, workload{file: file, kind: "CronJob", name: cj.Metadata.Name,
					cronSpec: &cj.Spec, job: cj.Spec.JobTemplate.Spec})
			case "Job":
				var j job
				if err := strict(doc, &j); err != nil {
					t.Errorf("k8s/%s: Job %s: %v", file, head.Metadata.Name, err)
					continue
				}
				m.workloads = append(m.workloads, workload{file: file, kind: "Job", name: j.Metadata.Name, job: j.Spec})
			case "Deployment":
				var d deployment
				if err := strict(doc, &d); err != nil {
					t.Errorf("k8s/%s: Deployment %s: %v", file, head.Metadata.Name, err)
					continue
				}
				m.servers = append(m.servers, server{file: file, name: d.Metadata.Name, spec: d.Spec})
			case "Service":
				var s service
				if err := strict(doc, &s); err != nil {
					t.Errorf("k8s/%s: Service %s: %v", file, head.Metadata.Name, err)
					continue
				}
				m.services = append(m.services, fileService{file, s})
			case "Secret":
				var s secret
				if err := strict(doc, &s); err != nil {
					t.Errorf("k8s/%s: Secret %s: %v", file, head.Metadata.Name, err)
					continue
				}
				m.secrets[file] = append(m.secrets[file], s)
			case "Kustomization":
				var k kustomization
				if err := strict(doc, &k); err != nil {
					t.Errorf("k8s/%s: %v", file, err)
					continue
				}
				m.kustomizations[file] = k
			}
		}
	}
	return m
}

func loadRailway(t *testing.T) railwayCron {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "railway.cron.yml"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := decodeDocuments(data)
	if err != nil {
		t.Fatalf("railway.cron.yml is not valid YAML: %v", err)
	}
	if len(docs) != 1 {
		t.Fatalf("railway.cron.yml holds %d documents, want 1", len(docs))
	}
	var rc railwayCron
	if err := strict(docs[0], &rc); err != nil {
		t.Fatalf("railway.cron.yml: %v", err)
	}
	return rc
}

// repoRoot is the module's root: the tests run in deploy/.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod in %s: %v", root, err)
	}
	return root
}

// binaries are the directories under cmd/: the binaries the image holds.
func binaries(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(repoRoot(t), "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatal("no binaries under cmd/")
	}
	return names
}

// argValue returns the value of --name in args (as "--name v" or
// "--name=v") and whether it is there.
func argValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// parseQuantity parses the Kubernetes quantities the manifests use (100m,
// 1, 64Mi, 1Gi, 500M) into base units (cores, bytes).
func parseQuantity(q string) (float64, error) {
	suffixes := []struct {
		s string
		f float64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"m", 1e-3}}
	for _, sf := range suffixes {
		if num, ok := strings.CutSuffix(q, sf.s); ok {
			v, err := strconv.ParseFloat(num, 64)
			return v * sf.f, err
		}
	}
	return strconv.ParseFloat(q, 64)
}

func TestParseQuantity(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]float64{"100m": 0.1, "1": 1, "64Mi": 64 << 20, "1Gi": 1 << 30, "500M": 5e8} {
		if got, err := parseQuantity(q); err != nil || got != want {
			t.Errorf("parseQuantity(%q) = %v, %v; want %v", q, got, err, want)
		}
	}
	if _, err := parseQuantity("lots"); err == nil {
		t.Error(`parseQuantity("lots") succeeded`)
	}
}

func TestStrictDecodingCatchesMistakes(t *testing.T) {
	t.Parallel()
	bad := map[string]string{
		"a tab":           "kind: CronJob\nspec:\n\tschedule: x\n",
		"a duplicate":     "kind: CronJob\nkind: Job\n",
		"a misspelling":   "kind: CronJob\nspec:\n  concurencyPolicy: Forbid\n",
		"a wrong nesting": "kind: CronJob\nspec:\n  jobTemplate:\n    backoffLimit: 2\n",
	}
	for name, doc := range bad {
		docs, err := decodeDocuments([]byte(doc))
		if err == nil {
			var cj cronJob
			err = strict(docs[0], &cj)
		}
		if err == nil {
			t.Errorf("a manifest with %s decoded without error", name)
		}
	}
	// A probe Kubernetes would drop unread leaves the console unprobed.
	docs, err := decodeDocuments([]byte("kind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n        - readinesProbe: {}\n"))
	if err == nil {
		var d deployment
		err = strict(docs[0], &d)
	}
	if err == nil {
		t.Error("a Deployment with a misspelt probe decoded without error")
	}
	docs, err = decodeDocuments([]byte("kind: Secret\n---\nkind: Job\n---\n"))
	if err != nil || len(docs) != 2 {
		t.Errorf("two documents and a trailing separator: %d documents, %v; want 2", len(docs), err)
	}
}
