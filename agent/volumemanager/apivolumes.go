package volumemanager

// API-backed volumes — secret, configMap, downwardAPI and projected ones, service account tokens
// included — are materialized as files under pods/<uid>/volumes/kubernetes.io~<plugin>/<name> in
// the kubelet's atomic ..data layout (WriteAtomic), which the runtime manager bind mounts read-only.
// Each lives on its own tmpfs, as the kubelet keeps secrets and projected volumes: their content
// never reaches a disk, and it goes when the pod's folder is torn down.
// Their objects come from the apiserver, or in standalone mode from Objects (the manifest folder).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/internal/podpath"
)

// ErrNoAPIServer: the pod needs objects from an apiserver and the agent runs without one.
var ErrNoAPIServer = errors.New("volume needs the apiserver, and the agent runs standalone")

const defaultMode = 0o644

type token struct {
	value            string
	refresh, expires time.Time
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func plugin(v *v1.Volume) string {
	switch {
	case v.Secret != nil:
		return "kubernetes.io~secret"
	case v.ConfigMap != nil:
		return "kubernetes.io~configmap"
	case v.DownwardAPI != nil:
		return "kubernetes.io~downward-api"
	case v.Projected != nil:
		return "kubernetes.io~projected"
	}
	return ""
}

// Path returns where an API-backed volume of the pod lives; false for other kinds, and for a UID or
// name that cannot be a path element (Prepare reports why).
func (m *Manager) Path(pod *v1.Pod, name string) (string, bool) {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.Name == name {
			if p := plugin(v); p != "" {
				dir, err := podpath.VolumeDir(m.RootDir, pod.UID, p, name)
				return dir, err == nil
			}
		}
	}
	return "", false
}

// Prepare makes every volume of the pod before its containers start: the local ones (SetUp), then
// the API-backed ones, refreshing content that changed (rotated tokens, edited config maps) in
// place. It is idempotent and runs at every sync; a pod whose volumes cannot be made does not start.
func (m *Manager) Prepare(ctx context.Context, pod *v1.Pod) error {
	err := m.SetUp(ctx, pod)
	if err == nil {
		err = m.prepareAPIVolumes(ctx, pod)
	}
	// A sync cut short (the pod's worker stopping, the agent shutting down) is no mount failure.
	if err != nil && m.Recorder != nil && ctx.Err() == nil {
		m.Recorder.Eventf(pod, v1.EventTypeWarning, "FailedMount", "MountVolume.SetUp failed: %v", err)
	}
	return err
}

func (m *Manager) prepareAPIVolumes(ctx context.Context, pod *v1.Pod) error {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if plugin(v) == "" {
			continue
		}
		files, err := m.files(ctx, pod, v)
		if err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
		dir, err := m.apiVolumeDir(pod, v, tmpfsSize(files))
		if err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
		if _, err := WriteAtomic(dir, files, fsGroup(pod)); err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return nil
}

// fsGroup is the pod's fsGroup, which the kubelet applies to the volumes that support ownership
// management: emptyDir and the API volumes.
func fsGroup(pod *v1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}

// Sizing of an API volume's tmpfs. The size is a cap, not a reservation: tmpfs takes memory only
// for what is written. It must hold two generations at once (the old one stays until ..data has
// swapped), each file rounded up to a page, plus the folders.
const (
	tmpfsPage    = 4096
	tmpfsMinSize = 4 << 20
)

func tmpfsSize(files map[string]File) int64 {
	var n int64
	for p, f := range files {
		n += (int64(len(f.Data)) + tmpfsPage - 1) / tmpfsPage * tmpfsPage
		n += int64(strings.Count(p, "/")+1) * tmpfsPage
	}
	return max(2*n+tmpfsMinSize, tmpfsMinSize)
}

// apiVolumeDir makes the volume's folder under 0750 parents and mounts its tmpfs (mode 0755, so
// containers running as any user read it through their bind mount), or grows the one mounted when
// the new content needs more room.
func (m *Manager) apiVolumeDir(pod *v1.Pod, v *v1.Volume, size int64) (string, error) {
	parent, err := m.pluginDir(pod.UID, plugin(v))
	if err != nil {
		return "", err
	}
	if err := podpath.Element("volume name", v.Name); err != nil {
		return "", err
	}
	dir := filepath.Join(parent, v.Name)
	if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	mounted, err := m.isMountPoint(dir)
	if err != nil {
		return "", err
	}
	if !mounted {
		if err := m.mounter().MountTmpfs(dir, size, 0o755); err != nil {
			return "", fmt.Errorf("tmpfs: %w", err)
		}
		return dir, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "", err
	}
	if int64(st.Blocks)*st.Bsize < size {
		if err := m.mounter().ResizeTmpfs(dir, size); err != nil {
			return "", fmt.Errorf("grow tmpfs: %w", err)
		}
	}
	return dir, nil
}

// Forget drops the cached tokens and resolved claims of a pod that is gone.
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.claims, uid)
	for k := range m.tokens {
		if strings.HasPrefix(k, string(uid)+"/") {
			delete(m.tokens, k)
		}
	}
}

func mode(m *int32, def *int32) os.FileMode {
	switch {
	case m != nil:
		return os.FileMode(*m)
	case def != nil:
		return os.FileMode(*def)
	}
	return defaultMode
}

func (m *Manager) files(ctx context.Context, pod *v1.Pod, v *v1.Volume) (map[string]File, error) {
	out := map[string]File{}
	switch {
	case v.Secret != nil:
		return out, m.secretFiles(ctx, pod, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, v.Secret.DefaultMode, out)
	case v.ConfigMap != nil:
		return out, m.configMapFiles(ctx, pod, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, v.ConfigMap.DefaultMode, out)
	case v.DownwardAPI != nil:
		return out, downwardFiles(pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode, m.allocatable(), out)
	}
	p := v.Projected
	for _, s := range p.Sources {
		var err error
		switch {
		case s.Secret != nil:
			err = m.secretFiles(ctx, pod, s.Secret.Name, s.Secret.Items, s.Secret.Optional, p.DefaultMode, out)
		case s.ConfigMap != nil:
			err = m.configMapFiles(ctx, pod, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, p.DefaultMode, out)
		case s.DownwardAPI != nil:
			err = downwardFiles(pod, s.DownwardAPI.Items, p.DefaultMode, m.allocatable(), out)
		case s.ServiceAccountToken != nil:
			var tok string
			if tok, err = m.serviceAccountToken(ctx, pod, s.ServiceAccountToken); err == nil {
				err = put(out, s.ServiceAccountToken.Path, []byte(tok), mode(nil, p.DefaultMode))
			}
		default:
			err = errors.New("unsupported projection (clusterTrustBundle and podCertificate are not supported)")
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func put(out map[string]File, path string, data []byte, m os.FileMode) error {
	if !filepath.IsLocal(path) {
		return fmt.Errorf("path %q must be relative and stay inside the volume", path)
	}
	out[filepath.Clean(path)] = File{Data: data, Mode: m}
	return nil
}

func itemsOrAll(keys []string, items []v1.KeyToPath) []v1.KeyToPath {
	if len(items) > 0 {
		return items
	}
	sort.Strings(keys)
	all := make([]v1.KeyToPath, 0, len(keys))
	for _, k := range keys {
		all = append(all, v1.KeyToPath{Key: k, Path: k})
	}
	return all
}

func (m *Manager) secretFiles(ctx context.Context, pod *v1.Pod, name string, items []v1.KeyToPath, optional *bool, def *int32, out map[string]File) error {
	data, err := m.SecretData(ctx, pod.Namespace, name)
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil
	}
	if err != nil {
		return err
	}
	return putKeys(out, data, items, def, "secret "+pod.Namespace+"/"+name)
}

func (m *Manager) configMapFiles(ctx context.Context, pod *v1.Pod, name string, items []v1.KeyToPath, optional *bool, def *int32, out map[string]File) error {
	cm, err := m.configMap(ctx, pod.Namespace, name)
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil
	}
	if err != nil {
		return err
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return putKeys(out, data, items, def, "config map "+pod.Namespace+"/"+name)
}

// putKeys writes the items of a secret's or config map's data into out (every key when items is
// empty); a named key that the object lacks is an error naming what (e.g. "secret ns/name").
func putKeys(out map[string]File, data map[string][]byte, items []v1.KeyToPath, def *int32, what string) error {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	for _, it := range itemsOrAll(keys, items) {
		d, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("%s has no key %q", what, it.Key)
		}
		if err := put(out, it.Path, d, mode(it.Mode, def)); err != nil {
			return err
		}
	}
	return nil
}

func formatMap(m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// One key="value" a line, without a newline after the last, as the kubelet writes them.
	var b bytes.Buffer
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return b.Bytes()
}

func downwardFiles(pod *v1.Pod, items []v1.DownwardAPIVolumeFile, def *int32, allocatable v1.ResourceList, out map[string]File) error {
	for _, it := range items {
		var data []byte
		switch {
		case it.FieldRef != nil:
			switch it.FieldRef.FieldPath {
			case "metadata.name":
				data = []byte(pod.Name)
			case "metadata.namespace":
				data = []byte(pod.Namespace)
			case "metadata.uid":
				data = []byte(pod.UID)
			case "metadata.labels":
				data = formatMap(pod.Labels)
			case "metadata.annotations":
				data = formatMap(pod.Annotations)
			default:
				v, err := subscriptedField(pod, it.FieldRef.FieldPath)
				if err != nil {
					return err
				}
				data = []byte(v)
			}
		case it.ResourceFieldRef != nil:
			v, err := ResourceFieldValue(pod, it.ResourceFieldRef, allocatable)
			if err != nil {
				return err
			}
			data = []byte(v)
		}
		if err := put(out, it.Path, data, mode(it.Mode, def)); err != nil {
			return err
		}
	}
	return nil
}

func (m *Manager) serviceAccountToken(ctx context.Context, pod *v1.Pod, p *v1.ServiceAccountTokenProjection) (string, error) {
	t, err := m.requestToken(ctx, pod, p.Audience, p.ExpirationSeconds)
	return t.value, err
}

// TokenStatus is a token of the pod's service account for a CSI driver that asks for one
// (csi.TokenFunc), from the same cache as projected tokens.
func (m *Manager) TokenStatus(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds *int64) (authenticationv1.TokenRequestStatus, error) {
	t, err := m.requestToken(ctx, pod, audience, expirationSeconds)
	return authenticationv1.TokenRequestStatus{Token: t.value, ExpirationTimestamp: metav1.NewTime(t.expires)}, err
}

// requestToken is a token of the pod's service account bound to the pod, cached until 80% of
// its life has passed, as the kubelet's token manager keeps them.
func (m *Manager) requestToken(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds *int64) (token, error) {
	if m.Client == nil {
		return token{}, ErrNoAPIServer
	}
	exp := int64(3607)
	if expirationSeconds != nil {
		exp = *expirationSeconds
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	key := fmt.Sprintf("%s/%s/%s/%d", pod.UID, sa, audience, exp)
	m.mu.Lock()
	if t, ok := m.tokens[key]; ok && m.now().Before(t.refresh) {
		m.mu.Unlock()
		return t, nil
	}
	m.mu.Unlock()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	resp, err := m.Client.ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return token{}, fmt.Errorf("token for service account %s/%s: %w", pod.Namespace, sa, err)
	}
	// Refresh at 80% of the lifetime, as the kubelet does.
	issued := m.now()
	life := resp.Status.ExpirationTimestamp.Sub(issued)
	if life <= 0 {
		life = time.Duration(exp) * time.Second
	}
	t := token{value: resp.Status.Token, refresh: issued.Add(life * 8 / 10), expires: issued.Add(life)}
	m.mu.Lock()
	if m.tokens == nil {
		m.tokens = map[string]token{}
	}
	m.tokens[key] = t
	m.mu.Unlock()
	return t, nil
}

// SecretData reads a secret.
func (m *Manager) SecretData(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	if m.Objects != nil {
		s, err := m.Objects.Secret(ctx, namespace, name)
		if err != nil {
			return nil, err
		}
		return s.Data, nil
	}
	if m.Client == nil {
		return nil, ErrNoAPIServer
	}
	s, err := m.Client.Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return s.Data, nil
}

func (m *Manager) configMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	if m.Objects != nil {
		return m.Objects.ConfigMap(ctx, namespace, name)
	}
	if m.Client == nil {
		return nil, ErrNoAPIServer
	}
	return m.Client.ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}

// ConfigMapData reads a config map's string data (env references use it).
func (m *Manager) ConfigMapData(ctx context.Context, namespace, name string) (map[string]string, error) {
	cm, err := m.configMap(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return cm.Data, nil
}
