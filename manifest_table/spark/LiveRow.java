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
 * row {@code row_index} of the data file whose name hashes to {@code file_key} (Spark's {@code
 * xxhash64(_metadata.file_name)}) is deleted, true otherwise. {@code deletes} is a literal built
 * on the driver by manifest_table/spark/live_row.py: the magic {@code MTLIVE01}, a count, then
 * per file its name (UTF-8) and its deletion bitmap (portable roaring format), each preceded by
 * its length as a 4-byte big-endian integer.
 *
 * <p>The literal is parsed once per task, on the first row: every row of a task passes the same
 * array. Files are found by the 64-bit hash of their name, which Spark computes on the row without
 * copying the name; two files of one literal with the same hash fail the query rather than risk a
 * wrong answer. Compiled from this source on the driver against the session's own Spark jars
 * (docs/design/005-spark-deletes.md).
 */
public final class LiveRow implements UDF3<Long, Long, byte[], Boolean> {
  private static final long SEED = 42L; // Spark's xxhash64 seed
  private static final byte[] MAGIC = "MTLIVE01".getBytes(StandardCharsets.US_ASCII);

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

  private transient volatile Deletes parsed;

  @Override
  public Boolean call(Long fileKey, Long rowIndex, byte[] deletes) throws IOException {
    Deletes d = parsed;
    if (d == null || d.source != deletes) {
      d = parse(deletes);
      parsed = d;
    }
    int at = Arrays.binarySearch(d.keys, fileKey);
    return at < 0 || !d.bitmaps[at].contains((int) (long) rowIndex);
  }

  static Deletes parse(byte[] deletes) throws IOException {
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(deletes));
    byte[] magic = new byte[MAGIC.length];
    in.readFully(magic);
    if (!Arrays.equals(magic, MAGIC)) {
      throw new IOException("manifest_table_live_row: the deletes literal does not start with MTLIVE01");
    }
    int count = in.readInt();
    long[] keys = new long[count];
    String[] names = new String[count];
    RoaringBitmap[] bitmaps = new RoaringBitmap[count];
    Integer[] order = new Integer[count];
    for (int i = 0; i < count; i++) {
      byte[] name = new byte[in.readInt()];
      in.readFully(name);
      byte[] bitmap = new byte[in.readInt()];
      in.readFully(bitmap);
      names[i] = new String(name, StandardCharsets.UTF_8);
      keys[i] = XXH64.hashUnsafeBytes(name, Platform.BYTE_ARRAY_OFFSET, name.length, SEED);
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
                + " have the same 64-bit name hash; read this table with the anti-join"
                + " (MANIFEST_TABLE_SPARK_JVM=0) and report it");
      }
    }
    return new Deletes(deletes, sortedKeys, sortedBitmaps);
  }
}
