package podsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/manifest"
)

// ManifestURLSource polls a URL for a Pod or PodList (the kubelet's --manifest-url). A failed fetch or a bad
// body keeps the last good set, so a flaky server does not stop pods. A body is read up to
// manifest.MaxSize and a request gets Timeout in all, so a hostile server can neither grow the agent
// nor hold its source.
type ManifestURLSource struct {
	URL      string
	Header   http.Header
	NodeName string
	Period   time.Duration // default 20s, the kubelet's httpCheckFrequency
	Timeout  time.Duration // of one request, body included; default 10s
	Set      func(source string, pods []*v1.Pod)
	Client   *http.Client
	Log      *slog.Logger
	// Errors, when set, receives each refused body or pod once per change (tests and events read it).
	Errors func(url string, err error)
	// RuntimeClasses, set on a standalone agent with a manifest folder, admits the URL's pods against
	// the folder's RuntimeClasses as the folder's own pods are (the first poll waits for the folder's
	// first read); unset, pods are not admitted and a runtimeClassName names the handler itself.
	RuntimeClasses *RuntimeClassSet

	last     []byte
	lastGen  uint64 // the RuntimeClasses' generation the last body was admitted against
	reported string // the error last reported, so a bad body is reported once, not every poll
}

// ErrHTTPStatus: the manifest URL answered with a status outside 2xx.
var ErrHTTPStatus = errors.New("manifest url status")

// Run polls until ctx ends.
func (s *ManifestURLSource) Run(ctx context.Context) error {
	if s.Period == 0 {
		s.Period = 20 * time.Second
	}
	if s.Timeout == 0 {
		s.Timeout = 10 * time.Second
	}
	if s.Client == nil {
		s.Client = &http.Client{}
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
	t := time.NewTicker(s.Period)
	defer t.Stop()
	for {
		err := s.poll(ctx)
		if ctx.Err() != nil {
			return nil
		}
		s.report(err)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (s *ManifestURLSource) report(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg == s.reported {
		return
	}
	s.reported = msg
	if err == nil {
		return
	}
	s.Log.Error("manifest url", "url", s.URL, "err", err)
	if s.Errors != nil {
		s.Errors(s.URL, err)
	}
}

func (s *ManifestURLSource) poll(ctx context.Context) error {
	data, err := s.fetch(ctx)
	if err != nil {
		return err
	}
	var admit func(*v1.Pod) error
	var gen uint64
	if s.RuntimeClasses != nil {
		var rcs manifest.RuntimeClasses
		if rcs, gen, err = s.RuntimeClasses.get(ctx); err != nil {
			return err
		}
		admit = rcs.Admit
	}
	if s.last != nil && bytes.Equal(data, s.last) && gen == s.lastGen {
		return nil
	}
	pods, err := manifest.Decode(data)
	if err != nil {
		return err
	}
	var good []*v1.Pod
	var bad []error
	for i, p := range pods {
		if admit != nil {
			if err := admit(p); err != nil {
				bad = append(bad, fmt.Errorf("pod %d (%s): %w", i, p.Name, err))
				continue
			}
		}
		if err := manifest.Default(p, HTTPSource, fmt.Sprintf("%s#%d", s.URL, i), s.NodeName); err != nil {
			bad = append(bad, fmt.Errorf("pod %d: %w", i, err))
			continue
		}
		good = append(good, p)
	}
	s.last, s.lastGen = data, gen
	// The refusals are told before the pods are handed on, so whoever sees the new pod set can
	// already read why a pod is missing from it.
	s.report(errors.Join(bad...))
	s.Set(HTTPSource, good)
	return nil
}

func (s *ManifestURLSource) fetch(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range s.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("%s: %w: %s", s.URL, ErrHTTPStatus, resp.Status)
	}
	if resp.ContentLength > manifest.MaxSize {
		return nil, fmt.Errorf("%s: %w: %d bytes, the limit is %d", s.URL, manifest.ErrTooLarge, resp.ContentLength, manifest.MaxSize)
	}
	data, err := manifest.ReadCapped(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.URL, err)
	}
	return data, nil
}
