package job

// SetHook stops d's reviews at the points hook refuses, as a process
// killed there would stop.
func SetHook(d *Driver, hook func(point string) error) { d.hook = hook }
