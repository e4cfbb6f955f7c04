// Package domain holds the market's types, the Provider interface, the GPU catalog and price math.
package domain
