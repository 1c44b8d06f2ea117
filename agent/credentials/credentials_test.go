package credentials

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type secrets map[string]map[string][]byte

func (s secrets) SecretData(_ context.Context, _, name string) (map[string][]byte, error) {
	if d, ok := s[name]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("secret %s not found", name)
}

func TestKeyring(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	k := &Keyring{Secrets: secrets{
		"hub":     {v1.DockerConfigJsonKey: []byte(`{"auths":{"https://index.docker.io/v1/":{"auth":"` + auth + `"}}}`)},
		"private": {v1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example:5000":{"username":"bob","password":"pw"}}}`)},
		"broken":  {v1.DockerConfigJsonKey: []byte(`{not json`)},
	}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: v1.PodSpec{ImagePullSecrets: []v1.LocalObjectReference{
		{Name: "missing"}, {Name: "broken"}, {Name: "hub"}, {Name: "private"}}}}
	for image, want := range map[string]string{
		"busybox:1":                    "alice:s3cret",
		"library/busybox":              "alice:s3cret",
		"docker.io/library/busybox:1":  "alice:s3cret",
		"registry.example:5000/app:v1": "bob:pw",
		"other.example/app:v1":         "",
		"localhost/app":                "",
	} {
		got := k.For(context.Background(), pod, image)
		s := ""
		if len(got) > 0 {
			s = got[0].Username + ":" + got[0].Password
		}
		if s != want || len(got) > 1 {
			t.Errorf("%s: got %q (%d), want %q", image, s, len(got), want)
		}
	}
}
