package app

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/nodelet/nodelet/runtime/streaming"
)

// errTLSPair: a certificate without its key, or a key without its certificate.
var errTLSPair = errors.New("--streaming-tls-cert-file and --streaming-tls-key-file go together")

// tlsFiles are the streaming server's certificate and key.
type tlsFiles struct{ cert, key string }

func (t *tlsFiles) bind(f *pflag.FlagSet) {
	f.StringVar(&t.cert, "streaming-tls-cert-file", "", "PEM certificate (chain) the streaming server presents; serves HTTPS")
	f.StringVar(&t.key, "streaming-tls-key-file", "", "PEM private key of --streaming-tls-cert-file")
}

// config loads the pair, or returns nil (plain HTTP) when none is given, which only a loopback
// addr may have: streaming URLs are bearer tokens for a shell in a container.
func (t *tlsFiles) config(addr string) (*tls.Config, error) {
	switch {
	case t.cert == "" && t.key == "":
		if err := streaming.RequireLoopback(addr); err != nil {
			return nil, fmt.Errorf("--streaming-address: %w; give --streaming-tls-cert-file and --streaming-tls-key-file, or keep it on 127.0.0.1", err)
		}
		return nil, nil
	case t.cert == "" || t.key == "":
		return nil, errTLSPair
	}
	cert, err := tls.LoadX509KeyPair(t.cert, t.key)
	if err != nil {
		return nil, fmt.Errorf("--streaming-tls-cert-file/--streaming-tls-key-file: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
