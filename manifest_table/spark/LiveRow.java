package manifest_table.spark;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.apache.spark.sql.api.java.UDF3;
import org.apache.spark.sql.catalyst.expressions.XXH64;
import org.apache.spark.unsafe.Platform;
import org.roaringbitmap.RoaringBitmap;

/**
 * Spark SQL function {@code manifest_table_live_row(file_key, row_index, deletes)}: false when
 * row {@code row_index} of the data file {@code file_key} names is deleted, true otherwise.
 * {@code deletes} is a literal built on the driver by manifest_table/spark/live_row.py: the magic
 * {@code MTLIVE02}, a count, how files are keyed (a byte: 1 when {@code file_key} is the file's
 * size, {@code _metadata.file_size}, which the driver chooses when the files' sizes differ; 0 when
 * it is Spark's {@code xxhash64(_metadata.file_name)}), then per file its name (UTF-8, preceded by
 * its length as a 4-byte big-endian integer), its size (8 bytes) and its deletion bitmap (portable
 * roaring format, preceded by its length).
 *
 * <p>The literal is parsed once per task, on the first row: every row of a task passes the same
 * array. A file's size is a constant of Spark's scan; a 64-bit hash of its name is computed per
 * row, on the bytes without copying them, and cost a fifth of a two-column read. Two files of one
 * literal with the same key fail the query rather than risk a wrong answer, and so does a row whose
 * key the literal lacks (only the files it lists are read through this filter: a size that is not
 * the manifest's would otherwise keep deleted rows). A file's bitmap is expanded into a plain
 * bitset the first time a task meets the file (its last deleted position / 8 bytes, up to 16 MiB;
 * beyond that the bitmap is asked), so that the check of a row is one array read: consecutive rows
 * come from the same file, whose bitset is kept at hand. Compiled from this source on the driver
 * against the session's own Spark jars (docs/design/006-spark-deletes.md). Spark gives each task
 * its own copy of the plan, so an instance is used by one thread.
 */
public final class LiveRow implements UDF3<Long, Long, byte[], Boolean> {
  private static final long serialVersionUID = 1L;
  private static final long SEED = 42L; // Spark's xxhash64 seed
  private static final byte[] MAGIC = "MTLIVE02".getBytes(StandardCharsets.US_ASCII);

  /** The parsed literal: file keys in ascending order and their bitmaps. Immutable. */
  private static final class Deletes {
    final byte[] source;
    final long[] keys;
    final RoaringBitmap[] bitmaps;

    Deletes(byte[] source, long[] keys, RoaringBitmap[] bitmaps) {
      this.source = source;
      this.keys = keys;
      this.bitmaps = bitmaps;
    }
  }

  /** One file's deleted rows, as a task asks about them. */
  private static final class FileDeletes {
    static final long MAX_BITSET_ROWS = 1L << 27;

    final long[] words;
    final RoaringBitmap large;

    FileDeletes(long[] words, RoaringBitmap large) {
      this.words = words;
      this.large = large;
    }

    static FileDeletes of(RoaringBitmap bitmap) {
      long last = bitmap.isEmpty() ? -1 : bitmap.last() & 0xFFFFFFFFL;
      if (last >= MAX_BITSET_ROWS) {
        return new FileDeletes(null, bitmap);
      }
      long[] words = new long[(int) ((last + 1 + 63) >>> 6)];
      bitmap.forEach((int position) -> words[position >>> 6] |= 1L << position);
      return new FileDeletes(words, null);
    }

    boolean deleted(long row) {
      if (large != null) {
        return large.contains((int) row);
      }
      int word = (int) (row >>> 6);
      return word < words.length && (words[word] & (1L << row)) != 0;
    }
  }

  private transient Deletes parsed;
  private transient FileDeletes[] files;
  private transient long currentKey;
  private transient FileDeletes current;

  @Override
  public Boolean call(Long fileKey, Long rowIndex, byte[] deletes) throws IOException {
    long key = fileKey;
    if (parsed == null || parsed.source != deletes) {
      parsed = parse(deletes);
      files = new FileDeletes[parsed.keys.length];
      current = null;
    }
    if (current == null || key != currentKey) {
      int at = Arrays.binarySearch(parsed.keys, key);
      if (at < 0) {
        throw new IOException(
            "manifest_table_live_row: a row of a data file the deletes literal does not list (file key "
                + key + "): its size or name is not the manifest's");
      }
      if (files[at] == null) {
        files[at] = FileDeletes.of(parsed.bitmaps[at]);
      }
      current = files[at];
      currentKey = key;
    }
    return !current.deleted(rowIndex);
  }

  static Deletes parse(byte[] deletes) throws IOException {
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(deletes));
    byte[] magic = new byte[MAGIC.length];
    in.readFully(magic);
    if (!Arrays.equals(magic, MAGIC)) {
      throw new IOException("manifest_table_live_row: the deletes literal does not start with MTLIVE02");
    }
    int count = in.readInt();
    boolean bySize = in.readByte() == 1;
    long[] keys = new long[count];
    String[] names = new String[count];
    RoaringBitmap[] bitmaps = new RoaringBitmap[count];
    Integer[] order = new Integer[count];
    for (int i = 0; i < count; i++) {
      byte[] name = new byte[in.readInt()];
      in.readFully(name);
      long size = in.readLong();
      byte[] bitmap = new byte[in.readInt()];
      in.readFully(bitmap);
      names[i] = new String(name, StandardCharsets.UTF_8);
      keys[i] = bySize ? size : XXH64.hashUnsafeBytes(name, Platform.BYTE_ARRAY_OFFSET, name.length, SEED);
      bitmaps[i] = new RoaringBitmap();
      bitmaps[i].deserialize(new DataInputStream(new ByteArrayInputStream(bitmap)));
      order[i] = i;
    }
    Arrays.sort(order, (a, b) -> Long.compare(keys[a], keys[b]));
    long[] sortedKeys = new long[count];
    RoaringBitmap[] sortedBitmaps = new RoaringBitmap[count];
    for (int i = 0; i < count; i++) {
      sortedKeys[i] = keys[order[i]];
      sortedBitmaps[i] = bitmaps[order[i]];
      if (i > 0 && sortedKeys[i] == sortedKeys[i - 1]) {
        throw new IOException(
            "manifest_table_live_row: data files " + names[order[i - 1]] + " and " + names[order[i]]
                + " have the same " + (bySize ? "size" : "64-bit name hash")
                + "; read this table with the anti-join (MANIFEST_TABLE_SPARK_JVM=0) and report it");
      }
    }
    return new Deletes(deletes, sortedKeys, sortedBitmaps);
  }
}
