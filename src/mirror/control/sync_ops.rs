//! Control-plane operations used by the metadata sync (`mirror::sync`): discovered topics,
//! partition increases, source topic re-creation. A child module of `control`, so it may use
//! the control plane's private state.
