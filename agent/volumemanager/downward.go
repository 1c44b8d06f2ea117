package volumemanager

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// subscriptedField reads one label or annotation of the pod, named as metadata.labels['key'] or
// metadata.annotations['key']; a key that is not set reads empty, as with the kubelet.
func subscriptedField(pod *v1.Pod, path string) (string, error) {
	field, key, ok := strings.Cut(strings.TrimSuffix(path, "']"), "['")
	if !ok || !strings.HasSuffix(path, "']") {
		return "", fmt.Errorf("downwardAPI field %q is not supported", path)
	}
	var m map[string]string
	check := key
	switch field {
	case "metadata.labels":
		m = pod.Labels
	case "metadata.annotations":
		// Annotation keys are matched case-insensitively by validation, as the API server's.
		m, check = pod.Annotations, strings.ToLower(key)
	default:
		return "", fmt.Errorf("downwardAPI field %q does not support subscript", path)
	}
	if errs := validation.IsQualifiedName(check); len(errs) != 0 {
		return "", fmt.Errorf("downwardAPI field %q: invalid key subscript: %s", path, strings.Join(errs, "; "))
	}
	return m[key], nil
}
