#include "synth/corpus.h"

namespace epq::synth {

std::string_view training_corpus() {
  return R"(The river ran past the old mill and under the stone bridge, where the children of
the village used to gather in the long summer evenings. They would throw pebbles into the
water and count the rings, and argue about whose stone had gone the farthest. When the
light began to fade, their mothers called them home for supper, one name after another,
until the bridge was empty and only the sound of the water remained.

A mixture of experts is a model in which each layer holds many small networks, called
experts, and a router that chooses a few of them for every token. Only the chosen experts
are computed, so the model can be very large while the work for each token stays small.
The weights of the experts that are not chosen are still stored somewhere, and the
question of where they are stored, and how quickly they can be brought back, decides how
fast the model can run on a machine with little memory.

In the morning the market opened early. Farmers brought baskets of apples and pears,
bread was still warm from the ovens, and the smell of coffee drifted across the square.
People talked about the weather, the price of grain, the new teacher at the school, and
the storm that had broken three windows of the church during the night. Nothing important
happened, and yet everyone remembered that morning for a long time.

Reading a file from a disk is slow compared with reading memory, but it is not as slow as
it used to be. A modern drive can deliver several gigabytes every second if the requests
are large and many of them are in flight at once. The trick is to ask for what will be
needed before it is needed, to keep what is used often, and to never wait when there is
other useful work to do.

She opened the letter slowly, as if the words inside might escape. It was short: three
lines in a careful hand, signed with a single initial. She read it twice, folded it along
its old creases, and put it back into the envelope. Then she went to the window and
watched the rain for a while, thinking about the summer when she had last seen him.
)";
}

}  // namespace epq::synth
