package fabric

import (
	"context"
	"log/slog"
)

// DefaultLogLevel is the least level the engine logs unless
// Config.LogLevel says otherwise: warnings and errors only, so an engine
// is quiet unless something goes wrong or the caller asks for more.
const DefaultLogLevel = slog.LevelWarn

// levelFloor passes records at or above min to the caller's handler,
// which may filter further. It lets Config.LogLevel quiet the engine
// without the caller building a handler for it.
type levelFloor struct {
	min slog.Leveler
	h   slog.Handler
}

func newEngineLogger(l *slog.Logger, min slog.Leveler) *slog.Logger {
	return slog.New(levelFloor{min: min, h: l.Handler()})
}

func (f levelFloor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min.Level() && f.h.Enabled(ctx, l)
}

func (f levelFloor) Handle(ctx context.Context, r slog.Record) error { return f.h.Handle(ctx, r) }

func (f levelFloor) WithAttrs(as []slog.Attr) slog.Handler {
	return levelFloor{min: f.min, h: f.h.WithAttrs(as)}
}

func (f levelFloor) WithGroup(name string) slog.Handler {
	return levelFloor{min: f.min, h: f.h.WithGroup(name)}
}
