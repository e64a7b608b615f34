//! `geopriv`: command-line front end of the geopriv SDK.
fn main() {}
