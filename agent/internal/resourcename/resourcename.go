// Package resourcename holds the apiserver's rules for resource names that the agent's parts
// (admission, the device manager, the Node's status) must agree on.
package resourcename

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// IsExtended is the apiserver's test of an extended resource: a qualified name with a domain
// outside kubernetes.io, not a request quota name, whose quota name would be valid.
func IsExtended(name string) bool {
	if !strings.Contains(name, "/") || strings.Contains(name, v1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(name, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+name)) == 0
}
