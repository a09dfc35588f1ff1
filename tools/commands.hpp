// The CLI's subcommands. Each takes the arguments after its name and returns the exit code;
// failures are thrown as CliError (check.hpp) and reported by main().
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace tessera_cli {

int run_info(const std::vector<std::string>& args);
int run_gemm(const std::vector<std::string>& args);
int run_tune(const std::vector<std::string>& args);
int run_attention(const std::vector<std::string>& args);

void print_info_help(std::FILE* out);
void print_gemm_help(std::FILE* out);
void print_tune_help(std::FILE* out);
void print_attention_help(std::FILE* out);

}  // namespace tessera_cli
