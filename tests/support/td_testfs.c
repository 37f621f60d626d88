#include "td_testfs.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void td_testfs_mkdtemp(const char *tag, char *buf, unsigned long n) {
  snprintf(buf, n, "/tmp/%s_XXXXXX", tag);
  ck_assert_ptr_nonnull(mkdtemp(buf));
}

void td_testfs_copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  ck_assert_msg(in && out, "copy %s -> %s", from, to);
  char buf[8192];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in))) ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
  fclose(in);
  fclose(out);
}

void td_testfs_copy_tree(const char *from, const char *to) {
  ck_assert_int_eq(mkdir(to, 0755), 0);
  DIR *d = opendir(from);
  ck_assert_ptr_nonnull(d);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/%s", from, e->d_name);
    snprintf(b, sizeof b, "%s/%s", to, e->d_name);
    struct stat st;
    ck_assert_int_eq(stat(a, &st), 0);
    if (S_ISDIR(st.st_mode))
      td_testfs_copy_tree(a, b);
    else
      td_testfs_copy_file(a, b);
  }
  closedir(d);
}

void td_testfs_remove_tree(const char *path) {
  DIR *d = opendir(path);
  if (!d) {
    unlink(path);
    return;
  }
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", path, e->d_name);
    struct stat st;
    if (!lstat(p, &st) && S_ISDIR(st.st_mode))
      td_testfs_remove_tree(p);
    else
      unlink(p);
  }
  closedir(d);
  rmdir(path);
}
