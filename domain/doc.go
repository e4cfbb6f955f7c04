// Package providers is gpumarket's domain: the pools of GPU capacity the
// clouds sell, their price history and interruption data, capacity-block
// offerings, reservations and fleets; the Provider interface every source
// implements; the embedded GPU catalog; and the price math that puts spot,
// blocks and on-demand on one scale (dollars per GPU-hour, with the
// interruption risk priced in).
//
// The package imports no cloud SDK: sources live in sub-packages
// (sim, aws, azure) and depend on this one, never the other way round.
package domain
