//! `warren-init`: a zone's PID 1, as a separate small binary so each zone maps (and
//! relocates) as little as possible. `warren` itself also answers to this name.

fn main() {
    warren::runtime::init::main();
}
