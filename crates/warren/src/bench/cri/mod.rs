//! The CRI side of Kubernetes for warren's tests and `warren bench cri`: a private
//! containerd with its CRI plugin and two RuntimeClass handlers, `runc` and `warren`
//! (the runc v2 shim with BinaryName = warren-oci) ([`daemon`]), the busybox and pause
//! images built from the host's busybox ([`image`]), and a CRI client ([`client`]);
//! the density bench over them ([`run`], [`report`]) and where RunPodSandbox's time
//! goes ([`phases`], from containerd's debug log); what one memory cgroup costs the
//! kernel outside it on this boot ([`memcg`]).

pub mod client;
pub mod daemon;
pub mod image;
pub mod memcg;
pub mod phases;
pub mod report;
pub mod run;

pub use client::{CriClient, CriError};
pub use daemon::{CriContainerd, Setup};
