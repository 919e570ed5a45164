# SPDX-License-Identifier: MIT
# A hash- and string-heavy Perl program with a deterministic output (used
# by tests/malloc_real.sh, which compares it under each allocator): hashes
# of a few hundred thousand keys built, grown, sliced and deleted; strings
# joined, split, substituted and repeated, from a few bytes to megabytes.
#
#   perl hash_strings.pl [ROUNDS]
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);

my $rounds = $ARGV[0] // 4;
my $x = 12345;
sub rnd { $x = ($x * 1103515245 + 12345) % 2147483648; return $x >> 8; }

my $digest = Digest::MD5->new;
for my $r (1 .. $rounds) {
	my %h;
	for my $i (1 .. 60000) {
		my $k = sprintf("%x-%d", rnd() % 40000, $i % 13);
		push @{ $h{$k} }, "v" x (1 + rnd() % 40);
	}
	my @keys = sort keys %h;
	delete @h{ @keys[ grep { $_ % 3 == 0 } 0 .. $#keys ] };
	my $s = join ",", map { $_ . "=" . scalar(@{ $h{$_} }) } sort keys %h;
	(my $t = $s) =~ s/([0-9a-f]+)-(\d+)/$2:$1/g;
	my @parts = split /,/, $t;
	my %count;
	$count{ length $_ }++ for @parts;
	my $big = join "", map { $_ x (1 + rnd() % 50) } @parts[ 0 .. 999 ];
	$digest->add($t, join(";", map { "$_:$count{$_}" } sort { $a <=> $b } keys %count),
		     length($big), substr($big, 0, 1000));
	print "round $r: ", scalar(keys %h), " keys, ", length($s), " bytes\n";
}
print "digest ", $digest->hexdigest, "\n";
