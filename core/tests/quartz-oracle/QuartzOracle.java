import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.text.ParseException;
import java.util.Date;
import java.util.TimeZone;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.quartz.CronExpression;

/**
 * Oracle for shardcron's differential cron tests: asks Quartz's own CronExpression for fire times.
 *
 * Input, one case per line on stdin (tab-separated; blank lines and lines starting with '#' are
 * echoed unchanged):
 *     EXPRESSION \t TIME_ZONE \t AFTER_EPOCH_MS \t COUNT
 * Output, one line per case on stdout: the four input columns followed by a fifth:
 *     ok:T1,T2,...   the next COUNT fire times (epoch ms) chained through getNextValidTimeAfter;
 *                    fewer when Quartz returns null (the schedule ended)
 *     error          Quartz rejected the expression (ParseException)
 *     timeout        Quartz did not answer within two seconds (it can loop for ever on some inputs)
 *     crash          Quartz accepted the expression but threw while searching (e.g. `L` in month)
 *
 * An empty TIME_ZONE means UTC (shardcron's rule; Quartz itself would use the JVM default).
 * Build and run: javac -cp /usr/share/java/quartz2.jar -d OUT QuartzOracle.java
 *                java -cp /usr/share/java/quartz2.jar:OUT QuartzOracle < cases.tsv
 */
public final class QuartzOracle {
    public static void main(String[] args) throws Exception {
        // A daemon worker so that a Quartz call that never returns cannot keep the JVM alive.
        ExecutorService worker = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "quartz-oracle");
            t.setDaemon(true);
            return t;
        });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty() || line.startsWith("#")) {
                out.println(line);
                continue;
            }
            String[] col = line.split("\t", -1);
            if (col.length != 4) {
                throw new IllegalArgumentException("expected 4 tab-separated columns: " + line);
            }
            final String expression = col[0];
            final String zone = col[1].isEmpty() ? "UTC" : col[1];
            final long after = Long.parseLong(col[2]);
            final int count = Integer.parseInt(col[3]);
            Future<String> answer = worker.submit(() -> evaluate(expression, zone, after, count));
            String result;
            try {
                result = answer.get(2, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                result = "crash";
            } catch (TimeoutException e) {
                answer.cancel(true);
                // The stuck thread cannot be stopped; replace the worker so later cases still run.
                worker = Executors.newSingleThreadExecutor(r -> {
                    Thread t = new Thread(r, "quartz-oracle");
                    t.setDaemon(true);
                    return t;
                });
                result = "timeout";
            }
            out.println(line + "\t" + result);
        }
        out.flush();
        System.exit(0);
    }

    private static String evaluate(String expression, String zone, long after, int count) {
        CronExpression cron;
        try {
            cron = new CronExpression(expression);
        } catch (ParseException e) {
            return "error";
        }
        cron.setTimeZone(TimeZone.getTimeZone(zone));
        StringBuilder sb = new StringBuilder("ok:");
        Date t = new Date(after);
        for (int i = 0; i < count; i++) {
            t = cron.getNextValidTimeAfter(t);
            if (t == null) {
                break;
            }
            if (i > 0) {
                sb.append(',');
            }
            sb.append(t.getTime());
        }
        return sb.toString();
    }
}
