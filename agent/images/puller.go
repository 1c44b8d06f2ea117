package images

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/metrics"
)

// puller bounds how many pulls run at once: 1 is the kubelet's serialized puller, 0 no bound.
// A pull waiting for a slot gives up when its context ends, so a deleted pod's pull never starts.
type puller struct {
	images ImageService
	slots  chan struct{} // nil: no bound
}

type pullResult struct {
	ref, id        string
	size           uint64
	pulling, total time.Duration
	err            error
}

func newPuller(images ImageService, limit int) *puller {
	p := &puller{images: images}
	if limit > 0 {
		p.slots = make(chan struct{}, limit)
	}
	return p
}

// pull tries each credential, then an anonymous pull, and reports the image's size afterwards.
func (p *puller) pull(ctx context.Context, req *runtimeapi.PullImageRequest, auths []*runtimeapi.AuthConfig) pullResult {
	start := time.Now()
	if p.slots != nil {
		select {
		case p.slots <- struct{}{}:
			defer func() { <-p.slots }()
		case <-ctx.Done():
			return pullResult{err: ctx.Err()}
		}
	}
	began := time.Now()
	var res pullResult
	for _, a := range append(auths, nil) {
		r := &runtimeapi.PullImageRequest{Image: req.Image, Auth: a, SandboxConfig: req.SandboxConfig}
		resp, err := p.images.PullImage(ctx, r)
		res.err = err
		if err == nil {
			res.ref = resp.ImageRef
			break
		}
	}
	res.pulling, res.total = time.Since(began), time.Since(start)
	if res.err != nil {
		return res
	}
	spec := req.Image
	if res.ref != "" {
		spec = &runtimeapi.ImageSpec{Image: res.ref}
	}
	if st, err := p.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec}); err == nil && st.Image != nil {
		res.size, res.id = st.Image.Size, st.Image.Id
	}
	metrics.ObserveImagePull(int64(res.size), res.pulling)
	return res
}
