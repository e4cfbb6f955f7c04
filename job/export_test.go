package job

import "time"

// SetHook stops d's reviews at the points hook refuses, as a process
// killed there would stop.
func SetHook(d *Driver, hook func(point string) error) { d.hook = hook }

// WallWait and LeaseOf expose how a driver paces itself on a fast clock.
func WallWait(d *Driver, next time.Time) time.Duration { return d.wallWait(next) }
func LeaseOf(d *Driver) time.Duration                  { return d.opt.Lease }

// ReactionOf is how late d may act on a due move, kept by the safety net.
func ReactionOf(d *Driver) time.Duration { return d.reaction() }
