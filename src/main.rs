fn main() {
    std::process::exit(udsfs::cli::main());
}
