// tessera: command-line front end of the library (device info, GEMM and attention runs, verification
// against cuBLASLt / an fp32 attention reference, and benchmarking). Subcommands live in *_cmd.cpp;
// this file only dispatches and maps errors to exit codes.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "check.hpp"
#include "commands.hpp"
#include "tessera/tessera.h"

namespace {

void print_help(std::FILE* out) {
  std::fprintf(out,
               "usage: tessera <command> [options]\n\n"
               "commands:\n"
               "  info       GPU, CUDA versions and the compiled GEMM configurations\n"
               "  gemm       run one GEMM: --verify against cuBLASLt, --compare cublas timing, --json results\n"
               "  tune       time every GEMM configuration on one problem and cache the fastest for later calls\n"
               "  attention  run one attention forward pass: --verify against an fp32 reference, --json results\n"
               "  help       `tessera help <command>` shows a command's options (as does `<command> --help`)\n\n"
               "exit codes: %d ok, %d verification failed, %d tessera error, %d no CUDA device,\n"
               "            %d CUDA/cuBLAS error or out of memory, %d bad command line\n",
               tessera_cli::kExitOk, tessera_cli::kExitVerifyFailed, tessera_cli::kExitTesseraError,
               tessera_cli::kExitNoDevice, tessera_cli::kExitCudaError, tessera_cli::kExitUsage);
}

int help_command(const std::vector<std::string>& args) {
  if (args.empty()) {
    print_help(stdout);
    return tessera_cli::kExitOk;
  }
  if (args[0] == "info") {
    tessera_cli::print_info_help(stdout);
  } else if (args[0] == "gemm") {
    tessera_cli::print_gemm_help(stdout);
  } else if (args[0] == "tune") {
    tessera_cli::print_tune_help(stdout);
  } else if (args[0] == "attention") {
    tessera_cli::print_attention_help(stdout);
  } else {
    tessera_cli::usage_error("help: unknown command '" + args[0] + "'");
  }
  return tessera_cli::kExitOk;
}

int dispatch(const std::string& command, const std::vector<std::string>& args) {
  if (command == "info") return tessera_cli::run_info(args);
  if (command == "gemm") return tessera_cli::run_gemm(args);
  if (command == "tune") return tessera_cli::run_tune(args);
  if (command == "attention") return tessera_cli::run_attention(args);
  if (command == "help" || command == "--help" || command == "-h") return help_command(args);
  if (command == "--version") {
    std::printf("tessera %s\n", tessera_version());
    return tessera_cli::kExitOk;
  }
  tessera_cli::usage_error("unknown command '" + command + "' (see `tessera --help`)");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_help(stderr);
    return tessera_cli::kExitUsage;
  }
  try {
    return dispatch(argv[1], std::vector<std::string>(argv + 2, argv + argc));
  } catch (const tessera_cli::CliError& e) {
    std::fprintf(stderr, "tessera: %s\n", e.what());
    return e.code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: internal error: %s\n", e.what());
    return tessera_cli::kExitCudaError;
  }
}
