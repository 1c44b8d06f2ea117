package fileid

import (
	"regexp"
	"strings"
	"testing"
)

// The loop must accept exactly what the pattern it replaced accepted.
func TestValidMatchesThePattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
	cases := []string{"", "a", "A9", "_a", ".a", "-a", "a_b.c-d", "a/b", "a b", "..", "ab\x00", "é",
		strings.Repeat("a", 128), strings.Repeat("a", 129), "0" + strings.Repeat("-", 127), "a\n"}
	for _, c := range cases {
		if got, want := Valid(c), pattern.MatchString(c); got != want {
			t.Errorf("Valid(%q) = %v, the pattern says %v", c, got, want)
		}
	}
}
