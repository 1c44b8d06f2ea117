package config

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
)

// ManifestURLSource polls a URL for a Pod or PodList (the kubelet's --manifest-url). A failed fetch or a bad
// body keeps the last good set, so a flaky server does not stop pods.
type ManifestURLSource struct {
	URL      string
	Header   http.Header
	NodeName string
	Period   time.Duration // default 20s, the kubelet's httpCheckFrequency
	Set      func(source string, pods []*v1.Pod)
	Client   *http.Client
	Log      *slog.Logger

	last []byte
}

// Run polls until ctx ends.
func (s *ManifestURLSource) Run(ctx context.Context) error {
	if s.Period == 0 {
		s.Period = 20 * time.Second
	}
	if s.Client == nil {
		s.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
	t := time.NewTicker(s.Period)
	defer t.Stop()
	for {
		if err := s.poll(ctx); err != nil && ctx.Err() == nil {
			s.Log.Warn("manifest url", "url", s.URL, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (s *ManifestURLSource) poll(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return err
	}
	for k, vs := range s.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", s.URL, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 10<<20))
	if err != nil {
		return err
	}
	if s.last != nil && bytes.Equal(data, s.last) {
		return nil
	}
	pods, err := decodeManifests(data)
	if err != nil {
		return err
	}
	var good []*v1.Pod
	for i, p := range pods {
		if err := applyDefaults(p, HTTPSource, fmt.Sprintf("%s#%d", s.URL, i), s.NodeName); err != nil {
			s.Log.Error("skipping bad pod from manifest url", "url", s.URL, "index", i, "err", err)
			continue
		}
		good = append(good, p)
	}
	s.last = data
	s.Set(HTTPSource, good)
	return nil
}
