/* td_testfs: file-system helpers for the unit tests (temporary directories,
 * copying fixture trees, removing them). Failures are Check assertions, so
 * call these only from inside a test or a checked fixture. */
#ifndef TD_TESTFS_H
#define TD_TESTFS_H

/* Creates a fresh directory "/tmp/<tag>_XXXXXX" and writes its path to buf. */
void td_testfs_mkdtemp(const char *tag, char *buf, unsigned long n);
void td_testfs_copy_file(const char *from, const char *to);
/* Copies the directory `from` to the new directory `to`, recursively. */
void td_testfs_copy_tree(const char *from, const char *to);
/* Removes a file or a directory tree; missing paths are fine. */
void td_testfs_remove_tree(const char *path);

#endif
