// Command e2ereport summarises a ginkgo JSON report of hack/conformance.sh:
//
//	go run ./hack/kube/e2ereport [--focus REGEX] [--skip REGEX] [--skipped FILE] report.json
//
// It prints `conformance: N passed, N failed, N skipped` over the specs the run selected, then
// each failed spec with the first line of its failure, then the reasons the suite gave for the
// specs it skipped itself, and exits 1 when one failed or when the run selected no spec at all.
// --skipped appends to FILE (Markdown) a section naming every spec the suite skipped, under the
// reason it gave.
// Specs that --focus does not match, or --skip does, were filtered out by ginkgo and are not
// counted; a selected spec the suite skipped itself (a missing feature it checks for) counts as
// skipped.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The parts of ginkgo's types.Report that the summary needs.
type report struct {
	SuiteDescription string
	SpecReports      []specReport
}

type specReport struct {
	ContainerHierarchyTexts []string
	LeafNodeText            string
	LeafNodeType            string
	State                   string
	RunTime                 time.Duration
	Failure                 struct{ Message string }
}

func (s specReport) fullText() string {
	return strings.Join(append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText), " ")
}

func main() {
	focus := flag.String("focus", "", "count only specs whose full text matches")
	skip := flag.String("skip", "", "do not count specs whose full text matches")
	skipped := flag.String("skipped", "", "append the specs the suite skipped, by reason, to this Markdown file")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: e2ereport [--focus REGEX] [--skip REGEX] [--skipped FILE] report.json")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *focus, *skip, *skipped); err != nil {
		fmt.Fprintln(os.Stderr, "e2ereport:", err)
		os.Exit(2)
	}
}

func run(path, focus, skip, skippedTo string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var reports []report
	if err := json.Unmarshal(b, &reports); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var focusRE, skipRE *regexp.Regexp
	if focus != "" {
		if focusRE, err = regexp.Compile(focus); err != nil {
			return fmt.Errorf("--focus: %w", err)
		}
	}
	if skip != "" {
		if skipRE, err = regexp.Compile(skip); err != nil {
			return fmt.Errorf("--skip: %w", err)
		}
	}
	sum := summarise(reports, focusRE, skipRE)
	if sum.passed+len(sum.failed)+sum.skipped == 0 {
		return errors.New("the run selected no spec: check --focus and --skip")
	}
	if skippedTo != "" {
		if err := appendSkipped(skippedTo, focus, skip, sum); err != nil {
			return err
		}
	}
	fmt.Printf("conformance: %d passed, %d failed, %d skipped\n", sum.passed, len(sum.failed), sum.skipped)
	for _, s := range sum.failed {
		fmt.Printf("  FAIL (%s) %s\n       %s\n", s.State, s.fullText(), firstLine(s.Failure.Message))
	}
	for _, s := range sum.slowest {
		fmt.Printf("  slowest: %5.1f s %s\n", s.RunTime.Seconds(), s.fullText())
	}
	if len(sum.skipReasons) > 0 {
		fmt.Println("  skipped by the suite itself, by reason:")
	}
	for _, r := range sum.skipReasons {
		fmt.Printf("  %4d × %s\n", r.count, r.reason)
	}
	if len(sum.failed) > 0 {
		os.Exit(1)
	}
	return nil
}

type summary struct {
	passed, skipped int
	failed          []specReport
	slowest         []specReport // the five longest passed specs, longest first
	skipReasons     []skipReason // why the suite skipped selected specs, most frequent first
}

type skipReason struct {
	reason string
	count  int
	specs  []string // sorted
}

// summarise counts the It specs the run selected: ginkgo reports every spec of the suite, those
// its --focus/--skip filtered out as skipped too, so the same filters are applied here; set-up and
// report nodes are left out (a failure there fails the run through ginkgo's exit code).
func summarise(reports []report, focusRE, skipRE *regexp.Regexp) summary {
	var sum summary
	reasons := map[string][]string{}
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.LeafNodeType != "It" {
				continue
			}
			text := r.SuiteDescription + " " + s.fullText()
			if (focusRE != nil && !focusRE.MatchString(text)) || (skipRE != nil && skipRE.MatchString(text)) {
				continue
			}
			switch s.State {
			case "passed":
				sum.passed++
				sum.slowest = append(sum.slowest, s)
			case "skipped", "pending":
				sum.skipped++
				reason := firstLine(s.Failure.Message)
				reasons[reason] = append(reasons[reason], s.fullText())
			default: // failed, panicked, timedout, interrupted, aborted
				sum.failed = append(sum.failed, s)
			}
		}
	}
	sort.SliceStable(sum.slowest, func(i, j int) bool { return sum.slowest[i].RunTime > sum.slowest[j].RunTime })
	if len(sum.slowest) > 5 {
		sum.slowest = sum.slowest[:5]
	}
	for reason, specs := range reasons {
		if reason == "" {
			reason = "(no reason given)"
		}
		sort.Strings(specs)
		sum.skipReasons = append(sum.skipReasons, skipReason{reason, len(specs), specs})
	}
	sort.Slice(sum.skipReasons, func(i, j int) bool {
		a, b := sum.skipReasons[i], sum.skipReasons[j]
		return a.count > b.count || (a.count == b.count && a.reason < b.reason)
	})
	return sum
}

// firstLine is the gist of a failure message: its first line, with the next ones while it is as
// short as gomega's "Expected" headers, at most 240 bytes.
func firstLine(msg string) string {
	var out string
	for _, l := range strings.Split(strings.TrimSpace(msg), "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if out != "" {
			out += " "
		}
		out += l
		if len(out) >= 40 {
			break
		}
	}
	if len(out) > 240 {
		out = out[:240] + "…"
	}
	return out
}

// appendSkipped adds to path a section for this run: its selection, then every spec the suite
// skipped under its reason.
func appendSkipped(path, focus, skip string, sum summary) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## focus `%s`\n\nskip `%s`: %d passed, %d failed, %d skipped by the suite:\n", focus, skip, sum.passed, len(sum.failed), sum.skipped)
	for _, r := range sum.skipReasons {
		fmt.Fprintf(&b, "\n### %s (%d)\n\n", r.reason, r.count)
		for _, s := range r.specs {
			fmt.Fprintf(&b, "- %s\n", s)
		}
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
