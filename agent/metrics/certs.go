package metrics

import (
	"crypto/tls"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The serving certificate's series, registered as the kubelet registers them: only when the agent
// asks the cluster for its serving certificate (serverTLSBootstrap), since only then does it
// renew one.
var (
	certsOnce      sync.Once
	certsMu        sync.Mutex
	servingCurrent func() *tls.Certificate
	renewErrors    prometheus.Counter
	rotationAge    prometheus.Histogram
)

// ServingCertificate registers kubelet_certificate_manager_server_ttl_seconds (seconds until the
// certificate current() gives expires, +Inf while there is none), the renewal error counter and
// the rotation age histogram. An agent made again in the same process (tests) reports its own.
func ServingCertificate(current func() *tls.Certificate) {
	once.Do(build)
	certsMu.Lock()
	servingCurrent = current
	certsMu.Unlock()
	certsOnce.Do(func() {
		renewErrors = prometheus.NewCounter(prometheus.CounterOpts{Subsystem: subsystem, Name: "server_expiration_renew_errors",
			Help: "Counter of certificate renewal errors."})
		rotationAge = prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: subsystem, Name: "certificate_manager_server_rotation_seconds",
			Help: "Histogram of the number of seconds the previous certificate lived before being rotated.",
			// The kubelet's: a minute, an hour, 4 hours, a day, a week, 1, 3 and 6 months, 1 and 4 years.
			Buckets: []float64{60, 3600, 14400, 86400, 604800, 2592000, 7776000, 15552000, 31104000, 124416000}})
		ttl := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Subsystem: subsystem, Name: "certificate_manager_server_ttl_seconds",
			Help: "Gauge of the shortest TTL (time-to-live) of the Kubelet's serving certificate. The value is in seconds " +
				"until certificate expiry (negative if already expired). If serving certificate is invalid or unused, the value will be +INF."},
			func() float64 {
				certsMu.Lock()
				current := servingCurrent
				certsMu.Unlock()
				if c := current(); c != nil && c.Leaf != nil {
					return math.Trunc(time.Until(c.Leaf.NotAfter).Seconds())
				}
				return math.Inf(1)
			})
		registry.MustRegister(renewErrors, rotationAge, ttl)
	})
}

// ServingRenewFailed counts a failed renewal of the serving certificate.
func ServingRenewFailed() {
	if renewErrors != nil {
		renewErrors.Inc()
	}
}

// ServingRotated records how long the replaced serving certificate lived.
func ServingRotated(lived time.Duration) {
	if rotationAge != nil {
		rotationAge.Observe(lived.Seconds())
	}
}
