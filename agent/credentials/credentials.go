// Package credentials finds registry credentials for an image in a pod's imagePullSecrets
// (kubernetes.io/dockerconfigjson and kubernetes.io/dockercfg secrets), as CRI AuthConfigs.
package credentials

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Secrets reads secret data (*volumemanager.Manager).
type Secrets interface {
	SecretData(ctx context.Context, namespace, name string) (map[string][]byte, error)
}

// Keyring answers for pods.
type Keyring struct {
	Secrets Secrets
}

type entry struct {
	Auth     string `json:"auth"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// registryOf is the registry host of an image reference, with Docker Hub's usual aliases folded.
func registryOf(image string) string {
	first, _, found := strings.Cut(image, "/")
	if !found || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		return "docker.io"
	}
	return first
}

func normalize(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	key, _, _ = strings.Cut(key, "/")
	switch key {
	case "index.docker.io", "registry-1.docker.io", "docker.io":
		return "docker.io"
	}
	return key
}

// For returns the credentials of every pull secret of the pod that names the image's registry, in
// the pod's order. Missing or malformed secrets are skipped: a pull without credentials may still work.
func (k *Keyring) For(ctx context.Context, pod *v1.Pod, image string) []*runtimeapi.AuthConfig {
	if k == nil || k.Secrets == nil || len(pod.Spec.ImagePullSecrets) == 0 {
		return nil
	}
	want := registryOf(image)
	var out []*runtimeapi.AuthConfig
	for _, ref := range pod.Spec.ImagePullSecrets {
		data, err := k.Secrets.SecretData(ctx, pod.Namespace, ref.Name)
		if err != nil {
			continue
		}
		auths := map[string]entry{}
		if b, ok := data[v1.DockerConfigJsonKey]; ok {
			var cfg struct {
				Auths map[string]entry `json:"auths"`
			}
			if json.Unmarshal(b, &cfg) == nil {
				auths = cfg.Auths
			}
		} else if b, ok := data[v1.DockerConfigKey]; ok {
			_ = json.Unmarshal(b, &auths)
		}
		for key, e := range auths {
			if normalize(key) != want {
				continue
			}
			a, err := toAuth(e, key)
			if err == nil {
				out = append(out, a)
			}
		}
	}
	return out
}

func toAuth(e entry, server string) (*runtimeapi.AuthConfig, error) {
	user, pass := e.Username, e.Password
	if e.Auth != "" {
		raw, err := base64.StdEncoding.DecodeString(e.Auth)
		if err != nil {
			return nil, err
		}
		u, p, ok := strings.Cut(string(raw), ":")
		if !ok {
			return nil, fmt.Errorf("auth of %s is not user:password", server)
		}
		user, pass = u, p
	}
	return &runtimeapi.AuthConfig{Username: user, Password: pass, ServerAddress: server}, nil
}
