# frozen_string_literal: true

require "test_helper"

# Native::Keyspace names every key as docs/keyspace.md lists it: each Ruby
# method reaches the solid_core function of the same name.
class KeyspaceTest < SolidJobsTest
  def test_every_key_as_documented
    k = SolidJobs::Native::Keyspace.new("ns")
    expected = {
      k.prefix => "ns:", k.channel("critical") => "ns:channel:critical", k.channels => "ns:channels",
      k.planned => "ns:planned", k.retrying => "ns:retrying", k.attempts => "ns:attempts",
      k.archive => "ns:archive", k.archive_entries => "ns:archive:entries", k.claims("n1") => "ns:claims:n1",
      k.node("n1") => "ns:node:n1", k.nodes => "ns:nodes", k.jobs => "ns:jobs", k.cancelling => "ns:cancelling",
      k.settled(7) => "ns:settled:7", k.fence => "ns:fence", k.holding("n1") => "ns:holding:n1",
      k.acked("n1") => "ns:acked:n1", k.incarnation => "ns:incarnation", k.metric("processed") => "ns:metric:processed",
      k.doorbell => "ns:doorbell", k.publishing => "ns:publishing", k.telemetry => "ns:telemetry",
      k.observations("n1") => "ns:observations:n1", k.control("n1") => "ns:control:n1",
      k.backtraces("n1") => "ns:backtraces:n1", k.tasks => "ns:tasks", k.channel_pattern => "ns:channel:*",
      k.claims_pattern => "ns:claims:*", k.observations_pattern => "ns:observations:*",
      k.flow("mailers") => "ns:flow:mailers", k.paused => "ns:paused"
    }
    expected.each { |got, want| assert_equal want, got }
    assert_equal 31, expected.size, "every method checked once (no two returned the same name)"
  end

  def test_frozen_and_shareable
    k = SolidJobs::Native::Keyspace.new(@namespace)
    assert_predicate k, :frozen?
    assert Ractor.shareable?(k)
    assert_equal [true, key("nodes")], SolidJobs::RactorCompat.join(Ractor.new(k) { |keys| [keys.frozen?, keys.nodes] })
  end

  def test_scan_names_what_the_pattern_matched
    k = SolidJobs::Native::Keyspace.new(@namespace)
    redis.lpush(k.channel("a"), "x")
    redis.lpush(k.channel("b.c"), "x")
    redis.set(k.channels, "not a channel list")
    assert_equal %w[a b.c], SolidJobs::Scan.names(SolidJobs.client, k.channel_pattern).sort
  end
end
