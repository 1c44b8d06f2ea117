package resourcename

import "testing"

func TestIsExtended(t *testing.T) {
	for name, want := range map[string]bool{
		"example.com/gpu": true, "nvidia.com/gpu": true,
		"cpu": false, "kubernetes.io/foo": false, "requests.example.com/gpu": false, "example.com/": false,
		"hugepages-2Mi": false, "example.com/a b": false,
	} {
		if got := IsExtended(name); got != want {
			t.Errorf("IsExtended(%q) = %v, want %v", name, got, want)
		}
	}
}
