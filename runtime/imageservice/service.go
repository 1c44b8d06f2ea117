// Package imageservice is the CRI v1 ImageService over the image store. It only translates: CRI
// messages in, store calls, CRI messages out. Errors wrap runtime/errdefs sentinels; the gRPC
// interceptor turns them into status codes.
package imageservice

import (
	"context"
	"log/slog"
	"strconv"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/imagestore"
)

// Images is what the service needs of the image store; *imagestore.Store implements it.
type Images interface {
	Pull(ctx context.Context, ref string, o imagestore.PullOptions) (*imagestore.Image, error)
	List() ([]*imagestore.Image, error)
	Get(ref string) (*imagestore.Image, error)
	Config(img *imagestore.Image) (*ocispec.Image, []byte, error)
	Remove(ctx context.Context, ref string) error
	FsUsage() (images, containers imagestore.Usage, err error)
	Root() string
}

// Service implements runtimeapi.ImageServiceServer.
type Service struct {
	runtimeapi.UnimplementedImageServiceServer
	images Images
	log    *slog.Logger
	pinned map[string]bool
}

// Option configures a Service.
type Option func(*Service)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// WithPinned marks images (by reference, as the kubelet's sandbox image is) as pinned, so the kubelet's
// image garbage collector leaves them alone.
func WithPinned(refs ...string) Option {
	return func(s *Service) {
		for _, r := range refs {
			s.pinned[r] = true
		}
	}
}

// New returns the ImageService over images.
func New(images Images, opts ...Option) *Service {
	s := &Service{images: images, log: slog.Default(), pinned: map[string]bool{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

var _ runtimeapi.ImageServiceServer = (*Service)(nil)

// toCRI describes img as CRI does, with the user the image runs as.
func (s *Service) toCRI(img *imagestore.Image) *runtimeapi.Image {
	out := &runtimeapi.Image{
		Id:          img.ID,
		RepoTags:    img.RepoTags,
		RepoDigests: img.RepoDigests,
		Size:        uint64(img.Size),
		Spec:        &runtimeapi.ImageSpec{Image: img.ID},
		Pinned:      s.isPinned(img),
	}
	if cfg, _, err := s.images.Config(img); err == nil {
		uid, name := splitUser(cfg.Config.User)
		if uid != nil {
			out.Uid = &runtimeapi.Int64Value{Value: *uid}
		}
		out.Username = name
	}
	return out
}

func (s *Service) isPinned(img *imagestore.Image) bool {
	if len(s.pinned) == 0 {
		return false
	}
	for ref := range s.pinned {
		if got, err := s.images.Get(ref); err == nil && got.ID == img.ID {
			return true
		}
	}
	return false
}

// splitUser reads an image's "user[:group]": a numeric user is a UID, anything else a name the
// runtime resolves inside the container.
func splitUser(u string) (*int64, string) {
	user, _, _ := strings.Cut(u, ":")
	if user == "" {
		return nil, ""
	}
	if n, err := strconv.ParseInt(user, 10, 64); err == nil && n >= 0 {
		return &n, ""
	}
	return nil, user
}
