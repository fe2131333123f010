package usereventsreceiver

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/userevents"
)

// Config is the userevents receiver's configuration.
type Config struct {
	// Source is where events come from: "kernel" (perf events on the
	// kernel's tracefs), "daemon" (a uetrace daemon's session) or "auto"
	// (the kernel when it has user_events, else the daemon).
	Source string `mapstructure:"source"`
	// Socket is the uetrace daemon's socket; "": its default
	// ($UETRACE_SOCKET, else the daemon's usual place).
	Socket string `mapstructure:"socket"`
	// Tracefs is the kernel's tracefs; "": /sys/kernel/tracing, else
	// /sys/kernel/debug/tracing.
	Tracefs string `mapstructure:"tracefs"`
	// Events are the events to take: "system:name" or "name" (system
	// user_events), globs allowed; none: every user event. Events that
	// appear later are taken too, unless NoFollow.
	Events []string `mapstructure:"events"`
	// NoFollow takes only the events that exist at start.
	NoFollow bool `mapstructure:"no_follow"`
	// BufferKB is the size of each per-CPU buffer in KiB; 0: the
	// source's default (as uetrace record's).
	BufferKB int `mapstructure:"buffer_kb"`
	// BatchSize is the most items the receiver gives a pipeline at once.
	BatchSize int `mapstructure:"batch_size"`
	// BatchDelay is the longest an item waits for its batch to fill.
	BatchDelay time.Duration `mapstructure:"batch_delay"`
	// ServiceName is the service.name of the resources whose records do
	// not name a service (Common Schema records do).
	ServiceName string `mapstructure:"service_name"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() *Config {
	return &Config{Source: "auto", BatchSize: 512, BatchDelay: 200 * time.Millisecond}
}

// backend is the Source as a userevents backend.
func (c *Config) backend() (userevents.Backend, error) {
	b, err := userevents.ParseBackend(c.Source)
	if err != nil {
		return 0, fmt.Errorf("source %q: want kernel, daemon or auto: %w", c.Source, unix.EINVAL)
	}
	return b, nil
}

// Validate checks the configuration; every error wraps EINVAL and says
// what to write instead.
func (c *Config) Validate() error {
	var errs []error
	if _, err := c.backend(); err != nil {
		errs = append(errs, err)
	}
	for i, e := range c.Events {
		if strings.TrimSpace(e) == "" || strings.ContainsAny(e, " \t\n") {
			errs = append(errs, fmt.Errorf("events[%d] %q: want system:name or name, globs allowed, without spaces: %w", i, e, unix.EINVAL))
		}
	}
	if c.BufferKB < 0 {
		errs = append(errs, fmt.Errorf("buffer_kb %d: want 0 (the default) or more: %w", c.BufferKB, unix.EINVAL))
	}
	if c.BatchSize <= 0 {
		errs = append(errs, fmt.Errorf("batch_size %d: want 1 or more: %w", c.BatchSize, unix.EINVAL))
	}
	if c.BatchDelay <= 0 {
		errs = append(errs, fmt.Errorf("batch_delay %v: want a positive duration, e.g. 200ms: %w", c.BatchDelay, unix.EINVAL))
	}
	if c.Socket != "" && c.Source == "kernel" {
		errs = append(errs, fmt.Errorf("socket %q is for source daemon or auto, not kernel: %w", c.Socket, unix.EINVAL))
	}
	return errors.Join(errs...)
}
