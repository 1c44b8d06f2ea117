// Package scripts checks the project's shell entry points for what they must not do.
package scripts

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The test command's outcome may not depend on a random search: fuzzing for new inputs is
// hack/fuzz.sh DURATION, run by hand, while go test replays the kept corpora.
func TestTestCommandSearchesNoFuzzInputs(t *testing.T) {
	search := regexp.MustCompile(`(^|\s)-(test\.)?fuzz(time)?([=\s]|$)|fuzz\.sh`)
	for _, file := range []string{"../../hack/test.sh", "../../.ci/run"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "#")
			if search.MatchString(code) {
				t.Errorf("%s:%d runs a fuzz search: %q", file, i+1, line)
			}
		}
	}
}

// CI runs exactly the README's test command.
func TestCIRunsTheTestCommand(t *testing.T) {
	b, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^exec bash hack/test\.sh\s*$`).Match(b) {
		t.Errorf(".ci/run does not exec hack/test.sh:\n%s", b)
	}
}
