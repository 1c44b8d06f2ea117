package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// Steps run in order and stop at the first failure; at debug level one line names each step run
// with its duration, and the one that failed.
func TestRunStepsStopsAtFailureAndLogsEachStep(t *testing.T) {
	var out bytes.Buffer
	s := &Engine{log: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	var ran []string
	mk := func(name string, err error) step {
		return step{name, func() error { ran = append(ran, name); return err }}
	}
	boom := errors.New("boom")
	err := s.runSteps(context.Background(), "create thing", func() string { return "id1" },
		[]step{mk("first", nil), mk("second", boom), mk("third", nil)})
	if !errors.Is(err, boom) || strings.Join(ran, ",") != "first,second" {
		t.Fatalf("err %v, ran %v", err, ran)
	}
	line := out.String()
	for _, want := range []string{`msg="create thing steps"`, "id=id1", "total=", "first=", "second=", "failedAt=second"} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "third=") {
		t.Errorf("a step after the failure is logged: %q", line)
	}
}
