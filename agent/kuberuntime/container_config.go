package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	cpuPeriod      = 100000
	minShares      = 2
	sharesPerCPU   = 1024
	milliCPUToCPU  = 1000
	oomGuaranteed  = -997
	oomBestEffort  = 1000
	oomBurstableLo = 2
	oomBurstableHi = 999
)

// expandVars replaces $(NAME) with env values as the kubelet does; $$ escapes a $.
func expandVars(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// makeEnv resolves the container's env: the Services' variables first, then envFrom, then env,
// later entries winning, with $(VAR) references expanded against what came before.
func (m *Manager) makeEnv(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) ([]*runtimeapi.KeyValue, map[string]string, error) {
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	svcKeys, svcVals, err := m.serviceEnv(pod)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range svcKeys {
		set(k, svcVals[k])
	}
	for _, from := range c.EnvFrom {
		data, optional, err := m.envFromData(ctx, pod.Namespace, from)
		if err != nil {
			if optional && apierrors.IsNotFound(err) {
				continue
			}
			return nil, nil, fmt.Errorf("envFrom: %w", err)
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(from.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		v := expandVars(e.Value, vals)
		if src := e.ValueFrom; src != nil {
			var err error
			found := true
			switch {
			case src.FieldRef != nil:
				v, err = m.fieldRef(pod, src.FieldRef.FieldPath, podIPs)
			case src.ResourceFieldRef != nil:
				v, err = m.resourceFieldRef(pod, c, src.ResourceFieldRef)
			case src.ConfigMapKeyRef != nil:
				v, found, err = m.keyRef(ctx, pod.Namespace, src.ConfigMapKeyRef.Name, src.ConfigMapKeyRef.Key, src.ConfigMapKeyRef.Optional, false)
			case src.SecretKeyRef != nil:
				v, found, err = m.keyRef(ctx, pod.Namespace, src.SecretKeyRef.Name, src.SecretKeyRef.Key, src.SecretKeyRef.Optional, true)
			case src.FileKeyRef != nil:
				err = errors.New("valueFrom.fileKeyRef is not supported")
			default:
				err = errors.New("unsupported valueFrom")
			}
			if err != nil {
				return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			if !found {
				continue
			}
		}
		set(e.Name, v)
	}
	out := make([]*runtimeapi.KeyValue, 0, len(order))
	for _, k := range order {
		out = append(out, &runtimeapi.KeyValue{Key: k, Value: []byte(vals[k])})
	}
	return out, vals, nil
}

func (m *Manager) envFromData(ctx context.Context, ns string, from v1.EnvFromSource) (map[string]string, bool, error) {
	if m.EnvData == nil {
		return nil, false, errors.New("config map and secret references need the apiserver")
	}
	switch {
	case from.ConfigMapRef != nil:
		d, err := m.EnvData.ConfigMapData(ctx, ns, from.ConfigMapRef.Name)
		return d, from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional, err
	case from.SecretRef != nil:
		raw, err := m.EnvData.SecretData(ctx, ns, from.SecretRef.Name)
		d := make(map[string]string, len(raw))
		for k, v := range raw {
			d[k] = string(v)
		}
		return d, from.SecretRef.Optional != nil && *from.SecretRef.Optional, err
	}
	return nil, false, errors.New("envFrom names neither a config map nor a secret")
}

// keyRef reads one key of a config map or secret; found is false when an optional reference
// misses, and the variable is then left out rather than set empty, as with the kubelet.
func (m *Manager) keyRef(ctx context.Context, ns, name, key string, optional *bool, secret bool) (string, bool, error) {
	if m.EnvData == nil {
		return "", false, errors.New("config map and secret references need the apiserver")
	}
	opt := optional != nil && *optional
	var v string
	var ok bool
	if secret {
		d, err := m.EnvData.SecretData(ctx, ns, name)
		if err != nil {
			if opt && apierrors.IsNotFound(err) {
				return "", false, nil
			}
			return "", false, err
		}
		var b []byte
		b, ok = d[key]
		v = string(b)
	} else {
		d, err := m.EnvData.ConfigMapData(ctx, ns, name)
		if err != nil {
			if opt && apierrors.IsNotFound(err) {
				return "", false, nil
			}
			return "", false, err
		}
		v, ok = d[key]
	}
	if !ok && !opt {
		return "", false, fmt.Errorf("key %q not found in %s", key, name)
	}
	return v, ok, nil
}

func (m *Manager) fieldRef(pod *v1.Pod, path string, podIPs []string) (string, error) {
	first := func(s []string) string {
		if len(s) > 0 {
			return s[0]
		}
		return ""
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return m.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return first(podIPs), nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	case "status.hostIP":
		return first(m.NodeIPs), nil
	case "status.hostIPs":
		return strings.Join(m.NodeIPs, ","), nil
	}
	if strings.HasPrefix(path, "metadata.labels['") && strings.HasSuffix(path, "']") {
		return pod.Labels[path[len("metadata.labels['"):len(path)-2]], nil
	}
	if strings.HasPrefix(path, "metadata.annotations['") && strings.HasSuffix(path, "']") {
		return pod.Annotations[path[len("metadata.annotations['"):len(path)-2]], nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

func oomScoreAdj(pod *v1.Pod, c *v1.Container) int64 {
	switch qosClass(pod) {
	case v1.PodQOSGuaranteed:
		return oomGuaranteed
	case v1.PodQOSBestEffort:
		return oomBestEffort
	}
	// Burstable: the larger a container's memory request, the less likely it is killed.
	req := c.Resources.Requests.Memory().Value()
	if req == 0 {
		return oomBurstableHi
	}
	adj := int64(1000 - (1000*req)/(64<<30))
	if adj < oomBurstableLo {
		adj = oomBurstableLo
	}
	if adj >= oomBurstableHi {
		adj = oomBurstableHi - 1
	}
	return adj
}

func linuxResources(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{OomScoreAdj: oomScoreAdj(pod, c)}
	cpuReq := c.Resources.Requests.Cpu().MilliValue()
	cpuLim := c.Resources.Limits.Cpu().MilliValue()
	if cpuReq == 0 && cpuLim > 0 {
		cpuReq = cpuLim
	}
	shares := cpuReq * sharesPerCPU / milliCPUToCPU
	if shares < minShares {
		shares = minShares
	}
	r.CpuShares = shares
	if cpuLim > 0 {
		r.CpuPeriod = cpuPeriod
		r.CpuQuota = cpuLim * cpuPeriod / milliCPUToCPU
	}
	r.MemoryLimitInBytes = c.Resources.Limits.Memory().Value()
	return r
}

func containerSecurityContext(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerSecurityContext {
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(pod)}
	psc := pod.Spec.SecurityContext
	if psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
	}
	csc := c.SecurityContext
	if csc != nil {
		if csc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *csc.RunAsUser}
		}
		if csc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *csc.RunAsGroup}
		}
		if csc.Privileged != nil {
			sc.Privileged = *csc.Privileged
		}
		if csc.ReadOnlyRootFilesystem != nil {
			sc.ReadonlyRootfs = *csc.ReadOnlyRootFilesystem
		}
		if csc.AllowPrivilegeEscalation != nil {
			sc.NoNewPrivs = !*csc.AllowPrivilegeEscalation
		}
		if csc.Capabilities != nil {
			sc.Capabilities = &runtimeapi.Capability{}
			for _, a := range csc.Capabilities.Add {
				sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
			}
			for _, d := range csc.Capabilities.Drop {
				sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
			}
		}
	}
	return sc
}

// generateContainerConfig translates one container of the pod into its CRI config.
func (m *Manager) generateContainerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, restartCount int, imageRef string, podIPs []string) (*runtimeapi.ContainerConfig, error) {
	return m.generateContainerConfigWith(ctx, pod, c, restartCount, imageRef, podIPs, nil)
}

// generateContainerConfigWith is generateContainerConfig for a container whose image volumes
// were pulled (pullImageVolumes).
func (m *Manager) generateContainerConfigWith(ctx context.Context, pod *v1.Pod, c *v1.Container, restartCount int, imageRef string,
	podIPs []string, imageVols imageVolumes) (*runtimeapi.ContainerConfig, error) {
	volumeDevices, err := m.makeVolumeDevices(pod, c)
	if err != nil {
		return nil, err
	}
	sc := containerSecurityContext(pod, c)
	if err := m.containerSecurityProfiles(pod, c, sc); err != nil {
		return nil, err
	}
	envs, vals, err := m.makeEnv(ctx, pod, c, podIPs)
	if err != nil {
		return nil, err
	}
	userns, err := m.podUserns(ctx, pod)
	if err != nil {
		return nil, err
	}
	mounts, err := m.makeMounts(ctx, pod, c, vals, imageVols)
	if err != nil {
		return nil, err
	}
	hosts, err := m.etcHostsMount(pod, c, podIPs)
	if err != nil {
		return nil, err
	}
	if hosts != nil {
		mounts = append(mounts, hosts)
	}
	annotations := newContainerAnnotations(c, pod, restartCount)
	// Last, so that no earlier error leaves a file behind.
	if mnt, name := m.terminationMessageMount(pod, c); mnt != nil {
		mounts = append(mounts, mnt)
		annotations[AnnotationTerminationMessageFile] = name
	}
	expand := func(in []string) []string {
		out := make([]string, len(in))
		for i, s := range in {
			out[i] = expandVars(s, vals)
		}
		return out
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:     expand(c.Command),
		Args:        expand(c.Args),
		WorkingDir:  c.WorkingDir,
		Envs:        envs,
		Mounts:      mounts,
		Labels:      newContainerLabels(c, pod),
		Annotations: annotations,
		LogPath:     filepath.Join(c.Name, strconv.Itoa(restartCount)+".log"),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       m.containerResources(pod, c),
			SecurityContext: sc,
		},
	}
	if m.Devices != nil {
		devs, err := m.Devices.RunContainerOptions(ctx, pod, c)
		if err != nil {
			return nil, err
		}
		applyDevices(cfg, devs)
	}
	// After the device plugins' devices, as the kubelet adds them.
	cfg.Devices = append(cfg.Devices, volumeDevices...)
	applyContainerUserns(cfg, userns)
	if cfg.Linux.SecurityContext.SupplementalGroupsPolicy, err = m.supplementalGroupsPolicy(ctx, pod); err != nil {
		return nil, err
	}
	return cfg, nil
}
