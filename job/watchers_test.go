package job_test

import (
	"github.com/gpumarket/gpumarket/cloud/aws"
	"github.com/gpumarket/gpumarket/cloud/azure"
	"github.com/gpumarket/gpumarket/job"
)

// The clouds whose fleets the driver watches itself.
var (
	_ job.FleetWatcher = (*aws.Provider)(nil)
	_ job.FleetWatcher = (*azure.Provider)(nil)
)
