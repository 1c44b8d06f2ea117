package app

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/nodelet/nodelet/runtime/config"
	"github.com/nodelet/nodelet/runtime/imagestore"
)

// registryFlags are how a person or a daemon says how to reach registries. The daemon's commands can
// bind them too, so both read the same flags.
type registryFlags struct {
	mirrors  []string
	insecure []string
	caFiles  []string
	file     string
}

func (r *registryFlags) bind(f *pflag.FlagSet) {
	f.StringArrayVar(&r.mirrors, "registry-mirror", nil, "HOST=URL: pull images of registry HOST from URL, same repository path (repeatable; docker.io for Docker Hub)")
	f.StringArrayVar(&r.insecure, "insecure-registry", nil, "registry host reached over plain HTTP or unverified TLS (repeatable; loopback is plain HTTP already)")
	f.StringArrayVar(&r.caFiles, "registry-ca-file", nil, "PEM file of a certificate authority trusted for registries (repeatable)")
	f.StringVar(&r.file, "registries-config", "", "YAML file with mirrors, insecure and caFiles (flags add to it)")
}

func (r *registryFlags) config() (imagestore.RegistryConfig, error) {
	var c imagestore.RegistryConfig
	if r.file != "" {
		var err error
		if c, err = imagestore.LoadRegistryConfig(r.file); err != nil {
			return c, err
		}
	}
	for _, m := range r.mirrors {
		if err := c.AddMirror(m); err != nil {
			return c, err
		}
	}
	c.Insecure = append(c.Insecure, r.insecure...)
	c.CAFiles = append(c.CAFiles, r.caFiles...)
	return c, nil
}

// newImageCmd is `nodelet image`: images in the local store, for a person at the machine. It works
// on the store directly, next to a running daemon: the store's lock files order every change
// between processes, and the daemon reads its image records from disk on every call.
func newImageCmd() *cobra.Command {
	var reg registryFlags
	open := func() (*imagestore.Store, error) {
		c, err := reg.config()
		if err != nil {
			return nil, err
		}
		return imagestore.Open(config.ImageDir(global.root), imagestore.WithRegistryConfig(c))
	}
	cmd := &cobra.Command{Use: "image", Short: "Pull, import, list and remove images in the local store"}
	reg.bind(cmd.PersistentFlags())

	var user, pass string
	pull := &cobra.Command{
		Use:   "pull REF",
		Short: "Pull an image from a registry",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := open()
			if err != nil {
				return err
			}
			o := imagestore.PullOptions{}
			if user != "" || pass != "" {
				o.Auth = &imagestore.Auth{Username: user, Password: pass}
			}
			pr := newProgressPrinter(os.Stderr)
			o.Progress = pr.update
			img, err := s.Pull(cmd.Context(), args[0], o)
			pr.done()
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), img.ID)
			return nil
		},
	}
	pull.Flags().StringVar(&user, "username", "", "registry user name")
	pull.Flags().StringVar(&pass, "password", "", "registry password")

	imp := &cobra.Command{
		Use:   "import FILE...",
		Short: "Load images from docker-archive (docker save) or OCI-layout tarballs",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := open()
			if err != nil {
				return err
			}
			for _, f := range args {
				imgs, err := s.Import(cmd.Context(), f)
				if err != nil {
					return err
				}
				for _, img := range imgs {
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", img.ID, strings.Join(img.RepoTags, " "))
				}
			}
			return nil
		},
	}

	var quiet bool
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List images",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := open()
			if err != nil {
				return err
			}
			imgs, err := s.List()
			if err != nil {
				return err
			}
			if quiet {
				for _, img := range imgs {
					fmt.Fprintln(cmd.OutOrStdout(), img.ID)
				}
				return nil
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 2, ' ', 0)
			fmt.Fprintln(w, "IMAGE\tTAG\tIMAGE ID\tSIZE")
			for _, img := range imgs {
				short := strings.TrimPrefix(img.ID, "sha256:")[:13]
				if len(img.RepoTags) == 0 {
					fmt.Fprintf(w, "<none>\t<none>\t%s\t%s\n", short, humanBytes(img.Size))
				}
				for _, t := range img.RepoTags {
					i := strings.LastIndex(t, ":")
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", t[:i], t[i+1:], short, humanBytes(img.Size))
				}
			}
			return w.Flush()
		},
	}
	ls.Flags().BoolVarP(&quiet, "quiet", "q", false, "print image IDs only")

	rm := &cobra.Command{
		Use:     "rm REF...",
		Aliases: []string{"rmi", "remove"},
		Short:   "Remove images (refused while a container uses one)",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := open()
			if err != nil {
				return err
			}
			var errs []error
			for _, r := range args {
				if err := s.Remove(cmd.Context(), r); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Deleted: %s\n", r)
			}
			return errors.Join(errs...)
		},
	}
	cmd.AddCommand(pull, imp, ls, rm)
	return cmd
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fkB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

// progressPrinter redraws one status line on a terminal, at most ten times a second; elsewhere
// (logs, pipes) it stays quiet.
type progressPrinter struct {
	f    *os.File
	tty  bool
	mu   sync.Mutex
	last time.Time
	p    imagestore.Progress
	seen bool
}

func newProgressPrinter(f *os.File) *progressPrinter {
	return &progressPrinter{f: f, tty: term.IsTerminal(int(f.Fd()))}
}

func (pp *progressPrinter) update(p imagestore.Progress) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.p, pp.seen = p, true
	if !pp.tty || time.Since(pp.last) < 100*time.Millisecond {
		return
	}
	pp.last = time.Now()
	pp.draw()
}

func (pp *progressPrinter) draw() {
	fmt.Fprintf(pp.f, "\r\033[Klayers %d/%d  %s/%s", pp.p.LayersDone, pp.p.Layers, humanBytes(pp.p.BytesDone), humanBytes(pp.p.Bytes))
}

func (pp *progressPrinter) done() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.tty && pp.seen {
		pp.draw()
		fmt.Fprintln(pp.f)
	}
}
