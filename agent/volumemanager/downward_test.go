package volumemanager

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// One label or annotation by key, as the kubelet writes it: its bare value, empty when unset.
func TestDownwardSubscriptedFields(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns",
		Labels:      map[string]string{"app": "web", "tier": "front"},
		Annotations: map[string]string{"example.com/Owner": "team-a"}}}
	items := []v1.DownwardAPIVolumeFile{
		{Path: "app", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}},
		{Path: "owner", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations['example.com/Owner']"}},
		{Path: "unset", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['nope']"}},
		{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
	}
	out := map[string]File{}
	if err := downwardFiles(pod, items, nil, nil, out); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"app": "web", "owner": "team-a", "unset": "", "labels": "app=\"web\"\ntier=\"front\""} {
		if got := string(out[path].Data); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	for path, wantErr := range map[string]string{
		"metadata.labels['bad key!']": "invalid key subscript",
		"metadata.name['x']":          "does not support subscript",
		"spec.nodeName":               "is not supported",
	} {
		err := downwardFiles(pod, []v1.DownwardAPIVolumeFile{{Path: "f", FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}, nil, nil, map[string]File{})
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: error %v, want %q", path, err, wantErr)
		}
	}
}
