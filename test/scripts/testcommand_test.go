// Package scripts checks the project's shell entry points for what they must not do.
package scripts

import (
	"os"
	"os/exec"
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

// hack/conformance.sh joins focus and skip expressions with these: an empty skip file or --skip
// must add no empty alternative, which as a skip would match every spec and run none.
func TestSkipExpressionsHaveNoEmptyAlternative(t *testing.T) {
	dir := t.TempDir()
	empty, lines := dir+"/empty.txt", dir+"/lines.txt"
	os.WriteFile(empty, []byte("# only a comment\n\n"), 0o644)
	os.WriteFile(lines, []byte("# reasons follow\n\\[Slow\\]  # slow\n\nSSH  # no keys\n"), 0o644)
	script := `. ../../hack/kube/lib.sh
printf '[%s]\n' "$(nl_alternatives "$1")" "$(nl_alternatives "$2")" "$(nl_join_alt "" "$(nl_alternatives "$1")" "X" "")" "$(nl_join_alt "" "")" "$(nl_join_alt "$(nl_alternatives "$2")" "Y")"`
	out, err := exec.Command("bash", "-c", script, "test", empty, lines).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := "[]\n[\\[Slow\\]|SSH]\n[X]\n[]\n[\\[Slow\\]|SSH|Y]\n"
	if string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
}
