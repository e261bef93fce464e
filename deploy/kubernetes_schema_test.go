package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	k8syaml "sigs.k8s.io/yaml"
)

// k8sDocs splits a multi-document manifest.
func k8sDocs(data []byte) [][]byte {
	var out [][]byte
	for _, d := range bytes.Split(data, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// decodeK8s decodes one manifest strictly into the Kubernetes API type of
// its kind (k8s.io/api: the types the API server's schema is generated
// from), so that a misspelt or misplaced field, a wrong type or an unknown
// kind fails as `kubectl apply --validate=strict` would.
func decodeK8s(doc []byte) (any, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := k8syaml.Unmarshal(doc, &head); err != nil {
		return nil, err
	}
	var obj any
	switch head.APIVersion + " " + head.Kind {
	case "v1 Namespace":
		obj = &corev1.Namespace{}
	case "v1 ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1 Secret":
		obj = &corev1.Secret{}
	case "v1 Pod":
		obj = &corev1.Pod{}
	case "apps/v1 DaemonSet":
		obj = &appsv1.DaemonSet{}
	default:
		return nil, fmt.Errorf("kind %q of apiVersion %q: not one this test knows", head.Kind, head.APIVersion)
	}
	if err := k8syaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s %s: %w", head.APIVersion, head.Kind, err)
	}
	return obj, nil
}

// TestKubernetesManifests: every manifest in deploy/kubernetes decodes
// strictly into the Kubernetes API's types; the namespace allows the
// daemon's hostNetwork and hostPath (pod-security privileged); the key is a
// Secret mounted owner-only at a path of its own; the consumer pod mounts
// the node's page read-only and reads it through GCLOCK_PAGE.
func TestKubernetesManifests(t *testing.T) {
	files, _ := filepath.Glob("kubernetes/*.yaml")
	if len(files) < 2 {
		t.Fatalf("manifests: %v", files)
	}
	var ns *corev1.Namespace
	var ds *appsv1.DaemonSet
	var consumer *corev1.Pod
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range k8sDocs(data) {
			obj, err := decodeK8s(doc)
			if err != nil {
				t.Errorf("%s, document %d: %v", f, i+1, err)
				continue
			}
			switch o := obj.(type) {
			case *corev1.Namespace:
				ns = o
			case *appsv1.DaemonSet:
				ds = o
			case *corev1.Pod:
				consumer = o
			}
		}
	}
	if ns == nil || ds == nil || consumer == nil {
		t.Fatalf("want a Namespace, a DaemonSet and a consumer Pod: %v %v %v", ns != nil, ds != nil, consumer != nil)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace %s: pod-security.kubernetes.io/enforce %q, want privileged (hostNetwork and hostPath)", ns.Name, ns.Labels["pod-security.kubernetes.io/enforce"])
	}
	if ds.Namespace != ns.Name || consumer.Namespace != ns.Name {
		t.Errorf("namespaces: DaemonSet %q, consumer %q, want %q", ds.Namespace, consumer.Namespace, ns.Name)
	}
	pod := ds.Spec.Template.Spec
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range pod.Containers[0].VolumeMounts {
		mounts[m.Name] = m
	}
	for _, v := range pod.Volumes {
		if v.Secret == nil {
			continue
		}
		if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o400 {
			t.Errorf("secret volume %s: defaultMode %v, want 0400 (the daemon refuses a key others can read)", v.Name, v.Secret.DefaultMode)
		}
		m, ok := mounts[v.Name]
		if !ok {
			t.Errorf("secret volume %s is not mounted", v.Name)
			continue
		}
		for _, other := range pod.Containers[0].VolumeMounts {
			if other.Name != m.Name && (strings.HasPrefix(m.MountPath+"/", other.MountPath+"/") || strings.HasPrefix(other.MountPath+"/", m.MountPath+"/")) {
				t.Errorf("the key's mount %s collides with %s's %s", m.MountPath, other.Name, other.MountPath)
			}
		}
	}
	if p := pod.Containers[0].ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v: want /readyz", p)
	}
	// The consumer: the node's page directory, read-only, named by GCLOCK_PAGE.
	var hostPath string
	for _, v := range consumer.Spec.Volumes {
		if v.HostPath != nil {
			hostPath = v.HostPath.Path
		}
	}
	var dsPage string
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			dsPage = v.HostPath.Path
		}
	}
	if hostPath == "" || hostPath != dsPage {
		t.Errorf("consumer hostPath %q, want the DaemonSet's page directory %q", hostPath, dsPage)
	}
	for _, c := range append(consumer.Spec.InitContainers, consumer.Spec.Containers...) {
		page := ""
		for _, e := range c.Env {
			if e.Name == "GCLOCK_PAGE" {
				page = e.Value
			}
		}
		ro := false
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(page, m.MountPath+"/") {
				ro = m.ReadOnly
			}
		}
		if page == "" || !ro {
			t.Errorf("consumer container %s: GCLOCK_PAGE %q must name a file in a read-only mount of the page", c.Name, page)
		}
	}
}

// TestKubernetesStrictDecodeCatches: the strict decoding is not a formality:
// a misspelt field and a wrong type are refused.
func TestKubernetesStrictDecodeCatches(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: [{name: a, image: b, volumeMount: []}]\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  hostNetwork: \"yes\"\n  containers: [{name: a, image: b}]\n",
		"apiVersion: apps/v1\nkind: DeamonSet\nmetadata: {name: x}\n",
	} {
		if _, err := decodeK8s([]byte(doc)); err == nil {
			t.Errorf("accepted:\n%s", doc)
		}
	}
}
