/* commands.h: the subcommands of the fleetprof CLI.  Each takes the
 * arguments after its name (argv[0] is the subcommand) and returns the
 * process exit status. */
#ifndef FP_COMMANDS_H
#define FP_COMMANDS_H

int fp_cmd_record(int argc, char **argv);
int fp_cmd_symbolize(int argc, char **argv);
int fp_cmd_upload(int argc, char **argv);
int fp_cmd_loadgen(int argc, char **argv);
int fp_cmd_report(int argc, char **argv);

#endif
