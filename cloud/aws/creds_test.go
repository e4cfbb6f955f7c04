package aws

import (
	"context"
	"errors"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
)

type failingCreds struct{}

func (failingCreds) Retrieve(context.Context) (awssdk.Credentials, error) {
	return awssdk.Credentials{}, errors.New("no EC2 IMDS role found, operation error ec2imds: GetMetadata, request canceled")
}
