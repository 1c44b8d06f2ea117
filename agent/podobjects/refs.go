package podobjects

import (
	v1 "k8s.io/api/core/v1"
)

// secretNames are the Secrets a pod references: volumes, projected sources, env and envFrom of
// every kind of container, and image pull secrets (the kubelet's podutil.VisitPodSecretNames).
func secretNames(pod *v1.Pod) map[string]bool {
	names := map[string]bool{}
	add := func(n string) {
		if n != "" {
			names[n] = true
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		add(s.Name)
	}
	visitEnv(pod, func(e v1.EnvFromSource) {
		if e.SecretRef != nil {
			add(e.SecretRef.Name)
		}
	}, func(e v1.EnvVar) {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			add(e.ValueFrom.SecretKeyRef.Name)
		}
	})
	for _, vol := range pod.Spec.Volumes {
		switch {
		case vol.Secret != nil:
			add(vol.Secret.SecretName)
		case vol.Projected != nil:
			for _, src := range vol.Projected.Sources {
				if src.Secret != nil {
					add(src.Secret.Name)
				}
			}
		case vol.CSI != nil && vol.CSI.NodePublishSecretRef != nil:
			add(vol.CSI.NodePublishSecretRef.Name)
		}
	}
	return names
}

// configMapNames are the ConfigMaps a pod references (the kubelet's VisitPodConfigmapNames).
func configMapNames(pod *v1.Pod) map[string]bool {
	names := map[string]bool{}
	add := func(n string) {
		if n != "" {
			names[n] = true
		}
	}
	visitEnv(pod, func(e v1.EnvFromSource) {
		if e.ConfigMapRef != nil {
			add(e.ConfigMapRef.Name)
		}
	}, func(e v1.EnvVar) {
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			add(e.ValueFrom.ConfigMapKeyRef.Name)
		}
	})
	for _, vol := range pod.Spec.Volumes {
		switch {
		case vol.ConfigMap != nil:
			add(vol.ConfigMap.Name)
		case vol.Projected != nil:
			for _, src := range vol.Projected.Sources {
				if src.ConfigMap != nil {
					add(src.ConfigMap.Name)
				}
			}
		}
	}
	return names
}

func visitEnv(pod *v1.Pod, from func(v1.EnvFromSource), env func(v1.EnvVar)) {
	visit := func(envFrom []v1.EnvFromSource, vars []v1.EnvVar) {
		for _, e := range envFrom {
			from(e)
		}
		for _, e := range vars {
			env(e)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		visit(c.EnvFrom, c.Env)
	}
	for _, c := range pod.Spec.Containers {
		visit(c.EnvFrom, c.Env)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		visit(c.EnvFrom, c.Env)
	}
}
