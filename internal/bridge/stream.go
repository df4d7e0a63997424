package bridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultDupWindow is the server's default duplicate window.
const DefaultDupWindow = 2 * time.Minute

// StreamOptions name the stream and say whether the bridge may create it.
//
// The policy: with Create, a missing stream (and, for the in direction,
// a missing consumer) is created with the settings here; without it, it
// must exist, and a missing one is an error (ErrNoStream, ErrNoConsumer)
// rather than a stream created with guesses in a production account. An
// existing stream is never changed; it is checked (CheckStream) and its
// own duplicate window is the one the bridge accounts against.
type StreamOptions struct {
	Stream    string
	Subject   string        // out: where messages are published; in: the consumer's filter ("" for all)
	Create    bool          // create what is missing
	DupWindow time.Duration // duplicate window of a created stream (default 2 min; at most MaxAge)
	MaxAge    time.Duration // MaxAge of a created stream (0: unlimited)
	Memory    bool          // memory storage for a created stream (default: file)
}

func (o StreamOptions) validate() error {
	if o.Stream == "" {
		return fmt.Errorf("%w: no stream name", ErrInvalidConfig)
	}
	if o.DupWindow < 0 || o.MaxAge < 0 {
		return fmt.Errorf("%w: --dup-window and --max-age must not be negative", ErrInvalidConfig)
	}
	if o.MaxAge > 0 && o.dupWindow() > o.MaxAge {
		return fmt.Errorf("%w: --dup-window %v exceeds --max-age %v (JetStream forbids it)", ErrInvalidConfig, o.dupWindow(), o.MaxAge)
	}
	return nil
}

func (o StreamOptions) dupWindow() time.Duration {
	if o.DupWindow == 0 {
		return DefaultDupWindow
	}
	return o.DupWindow
}

// EnsureStream returns the stream's info, creating the stream if it is
// missing and o.Create is set.
func EnsureStream(ctx context.Context, js jetstream.JetStream, o StreamOptions) (*jetstream.StreamInfo, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, o.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) && o.Create {
		cfg := jetstream.StreamConfig{
			Name:       o.Stream,
			Retention:  jetstream.LimitsPolicy,
			Storage:    jetstream.FileStorage,
			Duplicates: o.dupWindow(),
			MaxAge:     o.MaxAge,
		}
		if o.Subject != "" {
			cfg.Subjects = []string{o.Subject}
		}
		if o.Memory {
			cfg.Storage = jetstream.MemoryStorage
		}
		s, err = js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = js.Stream(ctx, o.Stream) // created by a racing bridge
		}
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNoStream, o.Stream)
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", o.Stream, err)
	}
	info := s.CachedInfo()
	return info, nil
}

// CheckStream refuses, for the out direction, a stream that cannot keep
// the bridge's promise: its retention must be Limits (the server rebuilds
// its duplicate entries after a restart only from the messages it still
// stores), its duplicate window not zero, and the subject one it binds.
func CheckStream(info *jetstream.StreamInfo, subject string) error {
	cfg := info.Config
	switch {
	case cfg.Retention != jetstream.LimitsPolicy:
		return fmt.Errorf("%w: stream %s has %s retention, want limits (its duplicate entries would not survive a restart)", ErrStreamConfig, cfg.Name, cfg.Retention)
	case cfg.Duplicates <= 0:
		return fmt.Errorf("%w: stream %s has no duplicate window", ErrStreamConfig, cfg.Name)
	case subject != "" && !bindsSubject(cfg.Subjects, subject):
		return fmt.Errorf("%w: stream %s does not bind subject %s (it binds %v)", ErrStreamConfig, cfg.Name, subject, cfg.Subjects)
	}
	return nil
}

// bindsSubject reports whether one of the stream's subjects (which may
// have wildcards) matches subject.
func bindsSubject(patterns []string, subject string) bool {
	for _, p := range patterns {
		if subjectMatches(p, subject) {
			return true
		}
	}
	return false
}

// subjectMatches is NATS subject matching: "*" one token, ">" the rest.
func subjectMatches(pattern, subject string) bool {
	pt, st := splitTokens(pattern), splitTokens(subject)
	for i, p := range pt {
		if p == ">" {
			return len(st) > i
		}
		if i >= len(st) || (p != "*" && p != st[i]) {
			return false
		}
	}
	return len(pt) == len(st)
}

func splitTokens(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// ConsumerOptions are the in direction's durable pull consumer.
type ConsumerOptions struct {
	Durable    string
	AckWait    time.Duration // default 30 s
	MaxDeliver int           // 0 or -1: unlimited
}

// EnsureConsumer returns the durable consumer, creating it (explicit
// acks) when missing and create is set. An existing one must use explicit
// acks: with any other policy an ack could cover messages not yet pushed.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, stream string, filter string, o ConsumerOptions, create bool) (jetstream.Consumer, error) {
	if o.Durable == "" {
		return nil, fmt.Errorf("%w: no durable consumer name", ErrInvalidConfig)
	}
	c, err := js.Consumer(ctx, stream, o.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) && create {
		maxDeliver := o.MaxDeliver
		if maxDeliver == 0 {
			maxDeliver = -1
		}
		ackWait := o.AckWait
		if ackWait == 0 {
			ackWait = 30 * time.Second
		}
		c, err = js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
			Durable:       o.Durable,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       ackWait,
			MaxDeliver:    maxDeliver,
			FilterSubject: filter,
		})
		if errors.Is(err, jetstream.ErrConsumerExists) {
			c, err = js.Consumer(ctx, stream, o.Durable)
		}
	}
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("%w: %s on stream %s", ErrNoConsumer, o.Durable, stream)
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNoStream, stream)
	}
	if err != nil {
		return nil, fmt.Errorf("consumer %s on stream %s: %w", o.Durable, stream, err)
	}
	if p := c.CachedInfo().Config.AckPolicy; p != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("%w: consumer %s acks %s, want explicit", ErrStreamConfig, o.Durable, p)
	}
	return c, nil
}

// AgingWarning is the one line an in bridge prints at start when its
// stream deletes messages nobody consumed (Limits retention with a limit
// and discard-old: MaxAge, MaxMsgs, MaxBytes, MaxMsgsPerSubject), or ""
// (docs/design.md, "Limits the bridge does not cover").
func AgingWarning(info *jetstream.StreamInfo) string {
	cfg := info.Config
	if cfg.Retention != jetstream.LimitsPolicy || cfg.Discard != jetstream.DiscardOld {
		return ""
	}
	var limits []string
	if cfg.MaxAge > 0 {
		limits = append(limits, fmt.Sprintf("max age %v", cfg.MaxAge))
	}
	if cfg.MaxMsgs > 0 {
		limits = append(limits, fmt.Sprintf("max messages %d", cfg.MaxMsgs))
	}
	if cfg.MaxBytes > 0 {
		limits = append(limits, fmt.Sprintf("max bytes %d", cfg.MaxBytes))
	}
	if cfg.MaxMsgsPerSubject > 0 {
		limits = append(limits, fmt.Sprintf("max messages per subject %d", cfg.MaxMsgsPerSubject))
	}
	if len(limits) == 0 {
		return ""
	}
	return fmt.Sprintf("warning: stream %s discards old messages past its limits (%s): messages not delivered before then never reach the ring", cfg.Name, strings.Join(limits, ", "))
}

// CheckDeadLetter refuses a dead-letter subject no stream binds: a
// publish there would fail at every ack wait, forever.
func CheckDeadLetter(ctx context.Context, js jetstream.JetStream, subject string) error {
	if subject == "" {
		return nil
	}
	if _, err := js.StreamNameBySubject(ctx, subject); err != nil {
		return fmt.Errorf("%w: --dead-letter %s: no stream binds it (%v)", ErrStreamConfig, subject, err)
	}
	return nil
}
